"""DDS security asked for where the middleware cannot give it: the node refuses to run unsecured.

The Fast DDS of the PyPI wheels is built without its security plugins (docs/robot.md#who-may-talk-
to-the-nodes). A node started with ``ROS_SECURITY_ENABLE=true`` and an enclave in a keystore exits
at once with status 2 and says why, instead of joining the graph without the protection its
operator asked for. (With a distribution that ships the plugins, SROS2's keystore and enclaves
apply as the docs say; that cannot run here.)"""

from __future__ import annotations

import pytest
from conftest import node_argv

pytestmark = pytest.mark.graph


@pytest.mark.parametrize("strategy", ["Enforce", "Permissive"])
def test_a_node_asked_for_dds_security_refuses_to_run_without_it(start_process, tmp_path, strategy):
    keystore = tmp_path / "keystore"
    (keystore / "enclaves" / "lifelong_learning" / "object_recognition").mkdir(parents=True)
    env = {
        "ROS_SECURITY_ENABLE": "true",
        "ROS_SECURITY_STRATEGY": strategy,
        "ROS_SECURITY_KEYSTORE": str(keystore),
    }
    argv = node_argv("object_recognition", "--enclave", "/lifelong_learning/object_recognition")
    process = start_process(argv, env=env)
    assert process.wait(60) == 2, process.log()
    log = process.log()
    assert "cannot start the node" in log and "ROS_SECURITY_ENABLE is true" in log, log
    assert "active: serving and learning" not in log
