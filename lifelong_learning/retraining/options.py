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

    ``range``: the values allowed (of each element, for a sequence); ``choices``: the values
    allowed, when they are few; ``label``: its name in error messages (default ``name``).
    ``cli``: its command-line flag (``--centers``, or a positional name) and ``form`` (one of
    :data:`FORMS`), ``metavar``; None: not on the command line. ``node``: the name of the
    ``nystrom_tuner`` parameter that sets it, ``node_note`` what the node does with it (said after
    the help); None: not a node parameter."""

    help: str
    default: Any = MISSING
    range: Range | None = None
    choices: tuple[Any, ...] | None = None
    label: str = ""
    cli: str | None = None
    form: str = "value"
    metavar: str | tuple[str, ...] | None = None
    node: str | None = None
    node_note: str = ""
    name: str = ""
    type: Any = None

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def check(self, value: Any) -> None:
        """ValueError unless ``value`` (each element of it, for a sequence) is within the range
        and among the choices."""
        label = self.label or self.name
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{label} must be one of {self.choices}, got {value!r}")
        if self.range is None or value is None:
            return
        if self.form in ("list", "csv", "pair"):
            values = list(value)
            if not values or not all(v in self.range for v in values):
                raise ValueError(f"{label} must be {self.range.phrase()}, got {values}")
        elif isinstance(value, bool) or value not in self.range:
            raise ValueError(f"{label} must be {self.range.phrase()}, got {value!r}")

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
        if self.default is MISSING or self.default is None or self.default == ():
            return self.help
        return f"{self.help} (default: {format_value(self.default)})"

    def from_cli(self, value: Any) -> Any:
        """The option's value from the parsed command line (``None``: not given). ValueError
        when a comma-separated text does not hold values of the option's type."""
        if value is None:
            return None
        if self.form == "switch-off":
            return not value
        if self.form == "pair":
            return tuple(value)
        if self.form == "csv":
            parts = [v.strip() for v in str(value).split(",") if v.strip()]
            kind = self.element_type()
            try:
                values = [kind(v) for v in parts]
            except ValueError:
                raise ValueError(f"{self.cli} takes comma-separated numbers, got {value!r}") from None
            return values or None  # an empty text: not given
        return list(value) if self.form == "list" else value

    # ------------------------------------------------------------------ node parameter
    def node_default(self) -> Any:
        """The node parameter's default: the option's, a sequence as comma-separated text, none as ''."""
        return to_parameter(self.default)

    def node_bounds(self) -> tuple[float, float] | None:
        """The node parameter's inclusive range (ValueError for a range a parameter cannot hold)."""
        if self.range is None:
            return None
        if not self.range.closed:
            raise ValueError(f"{self.name}: a node parameter's range must be closed and finite")
        return (self.range.low, self.range.high)

    def node_description(self) -> str:
        """The node parameter's description: the help, the choices, then the node's note."""
        text = self.help[:1].upper() + self.help[1:]
        if self.choices is not None:
            text += f" (one of {', '.join(map(str, self.choices))})"
        return f"{text}; {self.node_note}." if self.node_note else f"{text}."

    def from_node(self, value: Any) -> Any:
        """The option's value from the node parameter's (the inverse of :meth:`node_default`)."""
        if self.form in ("csv", "list") and isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()] or (
                None if self.default is None else self.default
            )
        if value == "" and self.default is None:
            return None
        return value


def option(default: Any = MISSING, *, help: str, **declared: Any) -> Any:
    """A dataclass field declared as an :class:`Option` (keyword arguments: its attributes)."""
    return field(default=default, metadata={KEY: Option(help=help, default=default, **declared)})


@functools.cache
def options_of(cls: type) -> tuple[Option, ...]:
    """The options of dataclass ``cls``, in field order, with their names and types."""
    hints = typing.get_type_hints(cls)
    return tuple(
        dataclasses.replace(f.metadata[KEY], name=f.name, type=hints[f.name])
        for f in dataclasses.fields(cls)
        if KEY in f.metadata
    )


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
