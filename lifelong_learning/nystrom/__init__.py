"""Nyström kernel ridge regression and its hyperparameter tuning (Meanti et al.), in torch.

No ROS imports: runs with ``pip install .`` on a GPU server or a laptop.
"""

from lifelong_learning.nystrom.krr import NystromKRR
from lifelong_learning.nystrom.objectives import EXACT_OBJECTIVES, OBJECTIVES, exact_objective
from lifelong_learning.nystrom.tuning import TuningResult, tune

__all__ = ["EXACT_OBJECTIVES", "OBJECTIVES", "NystromKRR", "TuningResult", "exact_objective", "tune"]
