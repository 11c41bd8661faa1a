"""lifelong_learning: a robot that keeps learning while it works.

Layers, imports pointing down only:

- :mod:`lifelong_learning.learners`: the numerical learners (no ROS imports): one recursive
  regularized least squares engine (:class:`~lifelong_learning.learners.RecursiveRLS`) and
  the incremental classifier built on it.
- :mod:`lifelong_learning.io`: the versioned model file format (no pickle) and bag I/O.
- :mod:`lifelong_learning.nodes`: thin rclpy adapters; they import rclpy only when run.
- :mod:`lifelong_learning.cli`: the ``lifelong-learning`` command.

Importing this package imports neither rclpy nor torch.
"""

__version__ = "0.1.0"
