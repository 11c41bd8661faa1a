# Enter this repository's environment by hand: `source scripts/env.sh` (bash or zsh).
# Activates .venv (ROS 2 from PyPI wheels) and sources the colcon install/ overlay, so that
# `python -c "import lifelong_learning.msg"`, the node executables and `lifelong-learning`
# work. Run scripts/bootstrap.sh (or `make build`) first.
_ll_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
# shellcheck disable=SC1091
source "$_ll_root/.venv/bin/activate"
export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
_ll_u=$-; set +u
# shellcheck disable=SC1091
source "$_ll_root/install/setup.bash"
case $_ll_u in *u*) set -u;; esac
unset _ll_root _ll_u
