#!/usr/bin/env bash
# `make test`: set up (idempotent), build, lint, then run the whole test suite against the
# colcon-built package. Extra arguments go to pytest (e.g. `make test ARGS="-k rlsc"`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
# shellcheck disable=SC1091
source "$root/scripts/env.sh"
cd "$root"
echo "[test] ruff check"
ruff check --quiet .
echo "[test] pytest (ROS 2 graph tests on a random ROS_DOMAIN_ID, localhost discovery only)"
export LL_REQUIRE_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1
# One BLAS thread per process: tests start several processes on few cores, and oversubscribed
# OpenBLAS threads made small solves ~15x slower here. Nothing tested depends on it.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
# Three test processes at once (pytest-xdist; LL_TEST_WORKERS=0 runs every test in this one): a run
# alone used 0.68 of one of this machine's 2 cores on average, most tests wait on DDS discovery, timers and
# the processes they start; three keep 2 cores busy (README: the runs with two to five). Each
# worker's graph tests run on a ROS domain of their own
# (test/conftest.py). The tests marked `serial` (the demo and the launch files: a whole robot's
# processes; real-time scheduling) run after them, alone, in one worker. Under workers, a test
# that hangs (a deadlock inside Fast DDS) is ended after 300 s and run once more on another worker;
# a test that fails is not (test/hangs.py).
# The `pytest` executable, not `python -m pytest`: the latter would put the source tree first
# on sys.path, and the tests must exercise the built package (LL_REQUIRE_INSTALLED checks it).
workers="${LL_TEST_WORKERS:-3}"
if [ "$workers" = 0 ]; then
  exec pytest -p no:cacheprovider --durations=15 "$@"
fi
status=0
pytest -p no:cacheprovider -n "$workers" --dist worksteal --durations=15 -m "not serial" "$@" || status=$?
echo "[test] the tests marked serial, alone"
serial=0
pytest -p no:cacheprovider -n 1 --durations=5 -m serial "$@" || serial=$?
# 5: none of them selected (e.g. ARGS="-k rlsc")
if [ "$serial" != 0 ] && [ "$serial" != 5 ]; then status=$serial; fi
if [ "$status" = 5 ] && [ "$serial" = 0 ]; then status=0; fi
exit "$status"
