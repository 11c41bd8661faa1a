"""Nyström kernel ridge regression and its hyperparameter tuning (Meanti et al.), in torch.

No ROS imports: runs with ``pip install .`` on a GPU server or a laptop. The names below are
loaded when first used, so that a module of this package that needs no torch
(:mod:`~lifelong_learning.nystrom.early_stopping`) can be imported without it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name → the module of this package that defines it
_HOMES = {
    "NystromKRR": "krr",
    "EXACT_OBJECTIVES": "objectives",
    "OBJECTIVES": "objectives",
    "exact_objective": "objectives",
    "TuningResult": "tuning",
    "tune": "tuning",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = ["EXACT_OBJECTIVES", "OBJECTIVES", "NystromKRR", "TuningResult", "exact_objective", "tune"]
