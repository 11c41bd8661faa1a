"""The service types ``launch_ros`` names (LoadNode, UnloadNode, ListNodes): placeholders that
fail when used (see the package's docstring)."""


class _Unavailable:
    """A service type of the stand-in: loading composable nodes is not possible here."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("composition_interfaces stand-in (tests): composable nodes cannot be loaded")

    Request = Response = None


class LoadNode(_Unavailable):
    pass


class UnloadNode(_Unavailable):
    pass


class ListNodes(_Unavailable):
    pass
