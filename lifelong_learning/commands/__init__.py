"""Sub-commands of the ``lifelong-learning`` CLI.

Each module here defines ``HELP: str``, ``add_arguments(parser)`` and ``run(args) -> int``;
:mod:`lifelong_learning.cli` discovers them, so adding a command needs no other edit.
Modules must import heavy dependencies (torch, rclpy, pinocchio) inside ``run`` only.
"""
