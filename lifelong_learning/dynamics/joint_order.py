"""Joint values picked by name from the arrays of a joint-state sample (no ROS).

A joint-state message names its joints: in any order, with joints the model does not have (a
gripper's), from several sources merged. A learner takes the values of its own joints, in its own
order, and refuses a sample that lacks one of them, repeats a name, holds NaN/Inf or has arrays of
another length than its names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lifelong_learning.dynamics.guard import RefusedSampleError


class JointPicker:
    """Picks the values of ``joints`` from by-name arrays; the index is kept while the names and the
    joints stay the same (a driver sends the same names every time)."""

    def __init__(self) -> None:
        self._cache: tuple[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] | None = None

    def order(self, names: Sequence[str], joints: Sequence[str]) -> np.ndarray:
        """Where ``joints`` are in ``names`` (KeyError: some are missing).

        Thread-safe without a lock (a multi-threaded executor answers from several threads): the
        cache is read once into a local and replaced whole, so a caller never returns the index
        another caller stored for other names."""
        key = (tuple(names), tuple(joints))
        cached = self._cache
        if cached is not None and cached[0] == key:
            return cached[1]
        index = {n: i for i, n in enumerate(names)}
        missing = [j for j in joints if j not in index]
        if missing:
            raise KeyError(f"joints {missing} missing")
        order = np.array([index[j] for j in joints], dtype=np.intp)
        order.flags.writeable = False  # shared by every caller with these names
        self._cache = (key, order)
        return order

    def pick(
        self, names: Sequence[str], joints: Sequence[str], values: Any, what: str, required: bool = True
    ) -> np.ndarray | None:
        """The values of ``joints`` from ``values`` (one per name); None when empty and not ``required``.

        Raises:
            KeyError: a joint is missing; ValueError: not one value per name; ArithmeticError: NaN/Inf.
        """
        arr = np.asarray(values, dtype=np.float64)
        if arr.size == 0 and not required:
            return None
        if arr.shape != (len(names),):
            raise ValueError(f"{what} has {arr.size} values for {len(names)} names")
        out = arr[self.order(names, joints)]
        if not np.all(np.isfinite(out)):
            raise ArithmeticError(f"{what} contains NaN or Inf")
        return out

    def state(
        self, names: Sequence[str], joints: Sequence[str], position: Any, velocity: Any, effort: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(q, q̇, τ)`` of ``joints`` from a joint state (``τ`` None when it has no effort).

        Raises:
            RefusedSampleError: ``duplicate joint names``, ``missing joints``, ``non-finite values``
                or ``array lengths``.
        """
        names = list(names)
        if len(set(names)) != len(names):
            raise RefusedSampleError("duplicate joint names", str(names))
        try:
            q = self.pick(names, joints, position, "position")
            qd = self.pick(names, joints, velocity, "velocity")
            tau = self.pick(names, joints, effort, "effort", required=False)
        except KeyError as exc:
            raise RefusedSampleError("missing joints", str(exc)) from exc
        except ArithmeticError as exc:
            raise RefusedSampleError("non-finite values", str(exc)) from exc
        except ValueError as exc:
            raise RefusedSampleError("array lengths", str(exc)) from exc
        assert q is not None and qd is not None
        return q, qd, tau
