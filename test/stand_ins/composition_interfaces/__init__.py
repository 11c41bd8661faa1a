"""A stand-in for ROS 2's ``composition_interfaces`` (no PyPI wheel), for the launch-system tests only.

``launch_ros.actions`` imports ``composition_interfaces.srv`` when it is loaded, for its
composable-node actions; this package starts no composable node, so the services are never
used. test/run_launch_file.py puts this folder on the path only where the real package is
missing (a ROS distribution has it). Never installed, never imported by the package.
"""
