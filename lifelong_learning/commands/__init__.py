"""Sub-commands of the ``lifelong-learning`` CLI.

Each sub-command is a module here that defines ``HELP: str``, ``add_arguments(parser)`` and
``run(args) -> int``; :mod:`lifelong_learning.cli` discovers them, so adding a command needs no
other edit. A module without ``HELP`` is shared by the sub-commands, not one of them
(:mod:`~lifelong_learning.commands.system_config`).
Modules must import heavy dependencies (torch, rclpy, pinocchio) inside ``run`` only.
"""
