"""Run the package's launch files with the real launch system, as ``ros2 launch`` would.

    python run_launch_file.py FILE [name:=value ...] [-- FILE [name:=value ...] ...]

Each ``FILE`` (a path, or the name of a file in the package's installed
share/lifelong_learning/launch) is included with ``IncludeLaunchDescription`` and its own
``name:=value`` launch arguments, in a scoped group (its arguments stay its own: as a launch file
that includes several with different arguments). One ``launch.LaunchService`` runs them all
until their nodes exit or SIGINT/SIGTERM arrives (the service forwards it to the nodes and waits
for them); the exit status is the service's. ``ros2launch`` (the command) has no wheel; with one
file this is what it does with these arguments.

Used by test/test_launch_system.py in a process of its own. Where ``composition_interfaces``
is missing (the ROS 2 PyPI wheels lack it), the stand-in in test/stand_ins/ is put on the path:
``launch_ros.actions`` imports it when it is loaded; no composable node is started here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

STAND_INS = Path(__file__).resolve().parent / "stand_ins"


def launch_arguments(argv: list[str]) -> list[tuple[str, str]]:
    """``name:=value`` pairs, in order; anything else is an error."""
    pairs = []
    for arg in argv:
        name, sep, value = arg.partition(":=")
        if not sep or not name:
            raise SystemExit(f"expected name:=value, not {arg!r}")
        pairs.append((name, value))
    return pairs


def launches(argv: list[str]) -> list[list[str]]:
    """``argv`` split at each ``--``: one ``[FILE, name:=value, ...]`` per launch file."""
    groups: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--":
            groups.append([])
        else:
            groups[-1].append(arg)
    if any(not group for group in groups):
        raise SystemExit(__doc__)
    return groups


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit(__doc__)
    if importlib.util.find_spec("composition_interfaces") is None:
        sys.path.insert(0, str(STAND_INS))
    from ament_index_python.packages import get_package_share_directory
    from launch import LaunchDescription, LaunchService
    from launch.actions import GroupAction, IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource

    groups = []
    for path, *arguments in launches(argv):
        if os.sep not in path:
            path = os.path.join(get_package_share_directory("lifelong_learning"), "launch", path)
        include = IncludeLaunchDescription(
            PythonLaunchDescriptionSource(path), launch_arguments=launch_arguments(arguments)
        )
        groups.append(GroupAction([include], scoped=True))
    service = LaunchService(argv=argv[1:])
    service.include_launch_description(LaunchDescription(groups))
    return service.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
