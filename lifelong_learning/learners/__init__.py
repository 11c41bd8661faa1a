"""Numerical learners (no ROS imports)."""

from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC

__all__ = ["IncrementalRLSC", "RecursiveRLS"]
