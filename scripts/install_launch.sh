#!/usr/bin/env bash
# Install the ROS 2 launch system (launch, launch_ros, launch_xml, launch_yaml) into .venv from
# its upstream sources in ../shared/vendor/ros2-launch, when that folder is there (it is in CI),
# so that test/test_launch_system.py runs the package's launch files with launch.LaunchService.
# They have no PyPI wheels; a robot's ROS distribution has them, and nothing in the package
# needs them at run time. Without the folder: nothing is done (those tests skip, saying why).
# Idempotent: reinstalled only when the sources change (a stamp in .venv, like the requirements').
# pip builds a local folder in place, and ../shared may be read-only: it installs from a copy
# in a temporary directory, so nothing is written beside the sources.
# Run by scripts/bootstrap.sh with .venv active.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vendor="${LL_LAUNCH_SOURCES:-$root/../shared/vendor/ros2-launch}"  # the tests read LL_LAUNCH_SOURCES too
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }
packages=(launch launch_ros launch_xml launch_yaml)
for package in "${packages[@]}"; do
  [ -d "$vendor/$package" ] || exit 0
done
osrf=osrf-pycommon==2.0.2  # launch's one dependency that the ros-* wheels do not bring
stamp="$root/.venv/.lifelong_learning-launch"
want=$( (echo "$osrf"; cd "$vendor" && find "${packages[@]}" -type f -not -name '*.pyc' -print0 |
  sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "launch system up to date (.venv, from $vendor)"
  exit 0
fi
say "installing the launch system from $vendor"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for package in "${packages[@]}"; do
  cp -r "$vendor/$package" "$tmp/"
done
chmod -R u+w "$tmp"
# --no-deps: launch_ros names ament_index_python, which the ros-ament-index-python wheel provides
# under another distribution name; lark comes with the ros-* wheels (as lark-parser, the name
# launch's package.xml depends on).
# (pip's output only on failure: the sources' setup.py files make setuptools warn at length)
{
  python -m pip install --no-deps --no-build-isolation "${packages[@]/#/$tmp/}" "$osrf"
  python -c "import lark" 2>/dev/null || python -m pip install lark
} > "$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log" >&2; echo "installing the launch system failed" >&2; exit 1; }
echo "$want" > "$stamp"
