"""ParamSpec ranges with "0 or at least m", ClockResets and counts of several
rejections at once: the rules, without a graph (one test creates a node in this process)."""

from __future__ import annotations

import pytest

from lifelong_learning.nodes.base import ClockResets, NodeBase, ParamSpec, RejectionCounter


def test_a_minimum_nonzero_refuses_tiny_values_and_keeps_zero() -> None:
    spec = ParamSpec("period_s", 1.0, "a period", bounds=(0.0, 3600.0), minimum_nonzero=0.01)
    assert spec.range_text() == "0 or [0.01, 3600]"
    assert spec.descriptor().additional_constraints == "0 or in [0.01, 3600]"
    assert spec.descriptor().floating_point_range[0].from_value == 0.0
    for ok in (0.0, 0.01, 1.0, 3600.0):
        assert spec.problem(ok) is None, ok
    for bad in (1e-9, 5e-324, 0.00999, -1.0, 3600.5, float("nan")):
        assert spec.problem(bad) == f"period_s is {bad!r}, outside its range 0 or [0.01, 3600]", bad
    plain = ParamSpec("count", 3, "a count", bounds=(1, 10))
    assert plain.range_text() == "[1, 10]" and plain.descriptor().additional_constraints == "in [1, 10]"
    assert plain.problem(0) == "count is 0, outside its range [1, 10]" and plain.problem(10) is None
    assert ParamSpec("name", "x", "text").problem("anything") is None


def test_a_minimum_nonzero_needs_a_range_from_zero_above_it_and_a_default_in_it() -> None:
    with pytest.raises(ValueError, match="needs bounds from 0"):
        ParamSpec("p", 1.0, "", bounds=(0.5, 10.0), minimum_nonzero=1.0)
    with pytest.raises(ValueError, match="needs bounds from 0"):
        ParamSpec("p", 1.0, "", minimum_nonzero=1.0)
    with pytest.raises(ValueError, match="default is below"):
        ParamSpec("p", 0.5, "", bounds=(0.0, 10.0), minimum_nonzero=1.0)


def test_every_period_and_rate_whose_zero_means_off_refuses_an_absurd_value() -> None:
    from lifelong_learning.nodes import catalog

    names = (
        "warn_period_s diagnostics_period_s input_timeout_s checkpoint_interval_s learn_max_hz "
        "learning_period_s feedback_period_s max_bagfile_duration_s max_bagfile_size"
    ).split()
    specs = {s.name: s for node in catalog.node_names() for s in catalog.declared_parameters(node)}
    for name in names:
        spec = specs[name]
        assert spec.minimum_nonzero is not None, name
        absurd = 1 if isinstance(spec.default, int) else 5e-324
        assert spec.problem(absurd) is not None and spec.problem(0 * spec.default) is None, name


def test_jumps_back_close_together_are_one_reset() -> None:
    resets = ClockResets(quiet_s=1.0)
    assert [resets.jumped(t) for t in (10.0, 10.1, 10.2, 10.9, 11.8)] == [1, 2, 3, 4, 5]
    assert resets.jumped(13.0) == 1  # 1.2 s quiet: a new reset
    assert resets.snapshot() == (2, 6)


def test_several_rejections_are_counted_at_once_and_warned_once() -> None:
    lines: list[str] = []

    class Logger:
        def warning(self, text: str) -> None:
            lines.append(text)

    counter = RejectionCounter(Logger(), 60.0, what="messages lost in transport")
    counter.reject("images", "3 frames", count=3)
    counter.reject("images", "2 frames", count=2)
    assert counter.snapshot() == {"images": 5} and counter.total == 5
    assert lines == ["messages lost in transport [images] (3 since the last warning): 3 frames"]


@pytest.mark.graph
def test_a_node_refuses_an_absurd_value_at_start_and_at_run_time(rclpy_context) -> None:
    from rclpy.exceptions import InvalidParameterValueException
    from rclpy.parameter import Parameter

    def node(**values: float) -> NodeBase:
        overrides = [Parameter(k, value=v) for k, v in values.items()]
        return NodeBase("ranges", context=rclpy_context, parameter_overrides=overrides)

    with pytest.raises(InvalidParameterValueException, match=r"outside its range 0 or \[0.01, 3600\]"):
        node(diagnostics_period_s=1e-9)
    ok = node(diagnostics_period_s=0.5)
    try:
        [result] = ok.set_parameters([Parameter("diagnostics_period_s", value=1e-9)])
        assert not result.successful and "diagnostics_period_s is 1e-09" in result.reason
        assert ok.get_parameter("diagnostics_period_s").value == 0.5 == ok.params["diagnostics_period_s"]
        [result] = ok.set_parameters([Parameter("diagnostics_period_s", value=0.0)])
        assert result.successful and ok.params["diagnostics_period_s"] == 0.0
    finally:
        ok.destroy_node()
