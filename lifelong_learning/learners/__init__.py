"""Numerical learners (no ROS imports)."""

from lifelong_learning.learners.recursive_rls import RecursiveRLS

__all__ = ["RecursiveRLS"]
