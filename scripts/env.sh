# Enter this repository's environment by hand: `source scripts/env.sh` (bash or zsh).
# Activates .venv (ROS 2 from PyPI wheels) and sources the colcon install/ overlay, so that
# `python -c "import lifelong_learning.msg"`, the node executables and `lifelong-learning`
# work, and exports FASTDDS_DEFAULT_PROFILES_FILE (below). Run scripts/bootstrap.sh (or
# `make build`) first.
_ll_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
# shellcheck disable=SC1091
source "$_ll_root/.venv/bin/activate"
export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
_ll_u=$-; set +u
# shellcheck disable=SC1091
source "$_ll_root/install/setup.bash"
case $_ll_u in *u*) set -u;; esac
# Camera-sized messages: this package's Fast DDS profile (config/fastdds_large_messages.xml),
# unless FASTDDS_DEFAULT_PROFILES_FILE is set already (yours is kept). The rule is one Python
# function, shared with `lifelong-learning up`, the demo and the launch files.
eval "$(python -P -c 'import shlex
from lifelong_learning.nodes.supervisor import middleware_environment
for k, v in middleware_environment().items():
    print(f"export {k}={shlex.quote(v)}")')"
unset _ll_root _ll_u
