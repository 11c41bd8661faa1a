#!/usr/bin/env bash
# `make demo`: set up (idempotent), build, then run the main job on its embedded defaults.
# Extra arguments go to `lifelong-learning demo` (e.g. `make demo ARGS=--quick`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
# shellcheck disable=SC1091
source "$root/scripts/env.sh"
cd "$root"
echo "[demo] lifelong-learning demo $*"
exec lifelong-learning demo "$@"
