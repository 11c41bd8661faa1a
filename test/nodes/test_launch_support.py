"""lifelong_learning.nodes.launch_support: launch arguments (strings) to a node's parameters."""

import re

import pytest

from lifelong_learning.nodes.launch_support import (
    LaunchArgumentError,
    flag,
    log_level,
    name_list,
    node_parameters,
)


def test_arguments_convert_to_the_declared_types():
    assert flag("x", " TRUE ") is True and flag("x", "false") is False
    assert name_list("j", "a, b,c") == ["a", "b", "c"] == name_list("j", "['a', b, c]")
    assert log_level("Debug") == "debug"


def test_only_given_arguments_override_the_files_and_in_the_documented_order(built_interfaces):
    from lifelong_learning.nodes.catalog import default_config_file

    shipped = str(default_config_file("inverse_dynamics"))
    assert node_parameters("inverse_dynamics", "", "false", {"urdf_path": "", "joint_names": " "}) == [
        shipped,
        {"use_sim_time": False},
    ]
    assert node_parameters("inverse_dynamics", " /r.yaml ", "true", {"learning": "false"}) == [
        shipped,
        "/r.yaml",
        {"use_sim_time": True},
        {"learning": False},
    ]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"n_featurs": "3"}, "node inverse_dynamics declares no parameter n_featurs"),
        ({"n_features": "3"}, "parameter n_features (int) has no launch argument"),
        ({"learning": "maybe"}, "learning:='maybe': expected true or false"),
    ],
)
def test_arguments_that_cannot_become_parameters_are_clear_errors(given, message, built_interfaces):
    with pytest.raises(LaunchArgumentError, match=re.escape(message)):
        node_parameters("inverse_dynamics", "", "false", given)
