"""The offline methods, in torch, on one estimator contract
(:class:`~lifelong_learning.nystrom.estimator.OfflineMethod`; by name:
:func:`~lifelong_learning.nystrom.methods.methods`): Nyström kernel ridge regression and its
hyperparameter tuning (Meanti et al.), stochastic low-rank kernel learning (SLKL, Machart et al.),
kernel truncated randomized ridge regression (KTR³, Jun, Cutkosky, Orabona), and the thesis's
own offline algorithms: the incremental Nyström path over the number of centres and NYTRO (ch. 4).

No ROS imports: runs with ``pip install .`` on a GPU server or a laptop. The names below are
loaded when first used, so that a module of this package that needs no torch
(:mod:`~lifelong_learning.nystrom.early_stopping`) can be imported without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names of _HOMES, for type checkers and editors (loaded at first use)
    from lifelong_learning.nystrom.estimator import OfflineMethod
    from lifelong_learning.nystrom.incremental import NystromPath
    from lifelong_learning.nystrom.krr import NystromKRR
    from lifelong_learning.nystrom.ktr3 import KTR3
    from lifelong_learning.nystrom.methods import method_named, methods
    from lifelong_learning.nystrom.nytro import NYTRO
    from lifelong_learning.nystrom.objectives import EXACT_OBJECTIVES, OBJECTIVES, exact_objective
    from lifelong_learning.nystrom.slkl import SLKL
    from lifelong_learning.nystrom.tuning import TuningResult, tune

#: name → the module of this package that defines it
_HOMES = {
    "NystromKRR": "krr",
    "OfflineMethod": "estimator",
    "SLKL": "slkl",
    "KTR3": "ktr3",
    "NYTRO": "nytro",
    "NystromPath": "incremental",
    "method_named": "methods",
    "methods": "methods",
    "EXACT_OBJECTIVES": "objectives",
    "OBJECTIVES": "objectives",
    "exact_objective": "objectives",
    "TuningResult": "tuning",
    "tune": "tuning",
}


def __getattr__(name: str) -> Any:
    """The name of :data:`_HOMES`, its module loaded now. An AttributeError raised while that
    module loads is raised as an ImportError from it: ``from lifelong_learning.nystrom import
    tune`` would otherwise turn it into "cannot import name 'tune'", the cause lost."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = f"{__name__}.{_HOMES[name]}"
    try:
        home = importlib.import_module(module)
    except AttributeError as exc:
        raise ImportError(f"{module} (which defines {name}) failed to load: {exc}", name=module) from exc
    return getattr(home, name)


__all__ = [
    "EXACT_OBJECTIVES",
    "KTR3",
    "NYTRO",
    "OBJECTIVES",
    "SLKL",
    "NystromKRR",
    "NystromPath",
    "OfflineMethod",
    "TuningResult",
    "exact_objective",
    "method_named",
    "methods",
    "tune",
]
