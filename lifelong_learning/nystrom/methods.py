"""The offline methods by name: each an estimator meeting the contract of
:class:`~lifelong_learning.nystrom.estimator.OfflineMethod` (checked over all of them by
``test/nystrom/test_methods.py``).

A new method: its class and a line in :func:`methods`.
"""

from __future__ import annotations

from typing import Any

from lifelong_learning.nystrom.estimator import OfflineMethod
from lifelong_learning.nystrom.incremental import NystromPath
from lifelong_learning.nystrom.ktr3 import KTR3
from lifelong_learning.nystrom.nytro import NYTRO
from lifelong_learning.nystrom.slkl import SLKL
from lifelong_learning.nystrom.tuned import TunedNystrom


def methods() -> dict[str, type[OfflineMethod]]:
    """Every offline method by name."""
    return {cls.name: cls for cls in (TunedNystrom, SLKL, NYTRO, NystromPath, KTR3)}


def method_named(name: str, **params: Any) -> OfflineMethod:
    """A new estimator of the method ``name`` with ``params`` (ValueError naming the known ones)."""
    known = methods()
    if name not in known:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(known)}")
    return known[name](**params)


__all__ = ["OfflineMethod", "method_named", "methods"]
