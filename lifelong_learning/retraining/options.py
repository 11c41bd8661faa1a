"""The options of a job, each declared once: a dataclass field made with :func:`option` carries its
name (the field's), type (its annotation), default, range, choices and help, and how the
``lifelong-learning tune`` command line and the ``nystrom_tuner`` node expose it.

The command's argparse options (:mod:`lifelong_learning.commands.tune`), the node's parameter
declarations (:mod:`lifelong_learning.nodes.nystrom_tuner`), their documentation
(``docs/parameters.md``) and the job's range checks (:meth:`Option.check`) are all made from these
declarations, so they cannot disagree; ``test/retraining/test_options.py`` checks that each still
does. Plain Python: no ROS, no torch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field
from typing import Any

#: how the command line gives an option: one value; several (``nargs="+"``); two (``nargs=2``);
#: one comma-separated text; a flag that turns the option off (``--no-progress``)
FORMS = ("value", "list", "pair", "csv", "switch-off")
#: the key of an :class:`Option` in a dataclass field's metadata
KEY = "option"


class _JobDefault:
    def __repr__(self) -> str:
        return "JOB_DEFAULT"


#: :attr:`Option.cli_default` of an option that the command line leaves at the job's default
JOB_DEFAULT: Any = _JobDefault()


@dataclass(frozen=True)
class Range:
    """An interval of numbers, each end closed unless said open; ``inf`` ends allowed."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: object) -> bool:
        try:
            v = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        above = self.low < v if self.low_open else self.low <= v
        below = v < self.high if self.high_open else v <= self.high
        return above and below  # NaN is in no range

    @property
    def closed(self) -> bool:
        """Both ends finite and closed: what a ROS parameter's range can say."""
        return not (self.low_open or self.high_open) and math.isfinite(self.low) and math.isfinite(self.high)

    def __str__(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"

    def phrase(self) -> str:
        """What a value must be, in words: ``in [1, 100]``, ``> 0``, ``finite and >= 4``."""
        if math.isfinite(self.high):
            return f"in {self}"
        bound = f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"finite and {bound}" if self.high_open else bound


@dataclass(frozen=True)
class Option:
    """One option of a job (see the module docstring). ``name``, ``type`` and ``default`` are
    those of its dataclass field (``default`` is :data:`dataclasses.MISSING` for a required one).

    ``range``: the values the job allows (of each element, for a sequence: decided by ``type``),
    ``range_note`` said with a value out of it (``inf disables the test``); ``choices``: the values
    allowed, when they are few; ``label``: its name in error messages (default ``name``).
    ``cli``: its command-line flag (``--centers``, or a positional name) and ``form`` (one of
    :data:`FORMS`), ``metavar``; None: not on the command line. ``cli_default``: the value the
    command line gives when the flag is absent, where it is not the job's ``default`` (a
    ``switch-off`` flag turns off what the command line turns on: ``True``). ``node``: the name of
    the ``nystrom_tuner`` parameter that sets it, ``node_range`` that parameter's bounds (closed
    and finite, as a ROS parameter's range is, and inside ``range``: the node may allow less than
    the job), ``node_note`` what the node does with it (said after the help); None: not a node
    parameter (no bounds)."""

    help: str
    default: Any = MISSING
    range: Range | None = None
    range_note: str = ""
    choices: tuple[Any, ...] | None = None
    label: str = ""
    cli: str | None = None
    form: str = "value"
    metavar: str | tuple[str, ...] | None = None
    cli_default: Any = JOB_DEFAULT
    node: str | None = None
    node_range: Range | None = None
    node_note: str = ""
    name: str = ""
    type: Any = None

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def is_sequence(self) -> bool:
        """Whether the option's value is a sequence of values (by its type: ``Sequence[float]``,
        ``tuple[float, float] | None``; never ``str``)."""
        return any(t in (list, tuple, Sequence) for t in _flat(self.type))

    def check(self, value: Any) -> None:
        """ValueError unless ``value`` (each element of it, for a sequence, which must not be
        empty) is within the range and among the choices."""
        label = self.label or self.name
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{label} must be one of {self.choices}, got {value!r}")
        if self.range is None or value is None:
            return
        must = self.range.phrase() + (f" ({self.range_note})" if self.range_note else "")
        if self.is_sequence():
            values = list(value)
            if not values or not all(v in self.range for v in values):
                raise ValueError(f"{label} must be {must}, got {values}")
        elif isinstance(value, bool) or value not in self.range:
            raise ValueError(f"{label} must be {must}, got {value!r}")

    # ------------------------------------------------------------------ command line
    def element_type(self) -> type:
        """The type of the value (of each element, for a sequence): int, float or str."""
        for t in _flat(self.type):
            if t in (int, float, str, bool):
                return t
        return str

    def cli_help(self) -> str:
        """The command-line help: the help and the default."""
        if self.form == "switch-off":
            return f"no {self.help}"
        shown = self.default if self.cli_default is JOB_DEFAULT else self.cli_default
        if shown is MISSING or shown is None or shown == ():
            return self.help
        return f"{self.help} (default: {format_value(shown)})"

    def from_cli(self, value: Any) -> Any:
        """The option's value from the parsed command line (``None``: not given, the job's default
        applies). A comma-separated text gives a list of the option's element type (ValueError
        when it does not hold such values); an empty one gives None for an option whose default
        is None (``--objective ''``: none named), else ``[]`` (refused by :meth:`check` where the
        option has a range: ``--forgetting ''``)."""
        if self.form == "switch-off":
            return self.cli_default if not value else not self.cli_default
        if value is None:
            return None if self.cli_default is JOB_DEFAULT else self.cli_default
        if self.form == "pair":
            return tuple(value)
        if self.form == "csv":
            return self._split(str(value), self.cli or self.name)
        return list(value) if self.form == "list" else value

    # ------------------------------------------------------------------ node parameter
    def node_default(self) -> Any:
        """The node parameter's default: the option's, a sequence as comma-separated text, none as ''."""
        return to_parameter(self.default)

    def node_bounds(self) -> tuple[float, float] | None:
        """The node parameter's inclusive range (``node_range``; None: unbounded)."""
        return None if self.node_range is None else (self.node_range.low, self.node_range.high)

    def node_description(self) -> str:
        """The node parameter's description: the help, the choices, then the node's note."""
        text = self.help[:1].upper() + self.help[1:]
        if self.choices is not None:
            text += f" (one of {', '.join(map(str, self.choices))})"
        return f"{text}; {self.node_note}." if self.node_note else f"{text}."

    def from_node(self, value: Any) -> Any:
        """The option's value from the node parameter's (the inverse of :meth:`node_default`): a
        sequence's comma-separated text converted as on the command line (:meth:`from_cli`)."""
        if self.is_sequence() and isinstance(value, str):
            return self._split(value, self.node or self.name)
        if value == "" and self.default is None:
            return None
        return value

    def _split(self, text: str, where: str) -> list[Any] | None:
        """The values of a comma-separated text, of the option's element type; an empty text: None
        where the default is None (none named), else ``[]``."""
        parts = [v.strip() for v in text.split(",") if v.strip()]
        kind = self.element_type()
        try:
            values = [kind(v) for v in parts]
        except ValueError:
            raise ValueError(f"{where} takes comma-separated numbers, got {text!r}") from None
        return None if not values and self.default is None else values


def option(default: Any = MISSING, *, help: str, **declared: Any) -> Any:
    """A dataclass field declared as an :class:`Option` (keyword arguments: its attributes).
    AssertionError for a declaration that cannot be right: a form not in :data:`FORMS`, a node
    range that is not closed and finite or reaches outside the job's range, a ``switch-off``
    flag without ``cli_default=True``."""
    opt = Option(help=help, default=default, **declared)
    assert opt.form in FORMS, f"form {opt.form!r} is not one of {FORMS}"
    if opt.node_range is not None:
        assert opt.node is not None, "a node range without a node parameter"
        assert opt.node_range.closed, f"a node parameter's range must be closed and finite: {opt.node_range}"
        assert opt.range is None or (opt.node_range.low in opt.range and opt.node_range.high in opt.range), (
            f"the node range {opt.node_range} reaches outside the job's range {opt.range}"
        )
    if opt.form == "switch-off":
        assert opt.cli_default is True, "a switch-off flag turns off what the command line turns on"
    return field(default=default, metadata={KEY: opt})


@functools.cache
def options_of(cls: type) -> tuple[Option, ...]:
    """The options of dataclass ``cls``, in field order, with their names and types.

    The rule: an option's annotation may name only what ``cls``'s module imports at run time (not
    under ``if TYPE_CHECKING:``): it is evaluated to give the option its type (a TypeError that
    says so otherwise). Each option's annotation is evaluated alone, and other fields' annotations
    never, so a field that is no option may name what the module imports for type checkers only."""
    return tuple(
        dataclasses.replace(f.metadata[KEY], name=f.name, type=_field_type(cls, f))
        for f in dataclasses.fields(cls)
        if KEY in f.metadata
    )


def _field_type(cls: type, f: dataclasses.Field[Any]) -> Any:
    """The type of field ``f`` of ``cls``: its annotation, evaluated in ``cls``'s module."""
    if not isinstance(f.type, str):  # the annotation, where its module does not postpone them
        return f.type
    alone = type(cls.__name__, (), {"__annotations__": {f.name: f.type}, "__module__": cls.__module__})
    try:
        return typing.get_type_hints(alone)[f.name]
    except NameError as exc:
        raise TypeError(
            f"{cls.__qualname__}.{f.name}: its annotation {f.type!r} names {exc.name!r}, which "
            f"{cls.__module__} does not import at run time (an option's type must be importable: not "
            "under TYPE_CHECKING)"
        ) from exc


def format_value(value: Any) -> str:
    """A default as the command line writes it: numbers as ``%g``, sequences comma-separated."""
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, Sequence):
        return ",".join(format_value(v) for v in value)
    return str(value)


def to_parameter(value: Any) -> Any:
    """A value as a ROS parameter holds it: none as '', a sequence as comma-separated text."""
    if value is None:
        return ""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return format_value(value)
    return value


def _flat(hint: Any) -> list[Any]:
    """The types in a type hint, outermost first (``Sequence[float] | None`` → Sequence, float, None)."""
    out = [typing.get_origin(hint) or hint]
    for arg in typing.get_args(hint):
        out += _flat(arg)
    return out
