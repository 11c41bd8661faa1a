"""The job's validation (retraining/job.py): what it refuses before any work, each declared range,
and on a cluster which process checks which files."""

import numpy as np
import pytest

from lifelong_learning.io.bags import write_labeled_features
from lifelong_learning.nystrom.distributed import Group
from lifelong_learning.retraining.job import TuningJob, job_options


def test_a_bag_or_objective_named_twice_is_refused(tmp_path, make_job):
    write_labeled_features(tmp_path / "bag", np.zeros((4, 3)), ["a"] * 4)
    base = {"task": "classification", "out": str(tmp_path / "m.llm")}
    with pytest.raises(ValueError, match="a bag is named twice"):  # one directory, two spellings
        TuningJob(bags=[str(tmp_path / "bag"), str(tmp_path / "bag") + "/"], **base).validate()
    with pytest.raises(ValueError, match="an objective is named twice"):
        make_job("bag", task="classification", objectives=["proposed", "proposed"]).validate()
    with pytest.raises(ValueError, match="no such bag"):
        make_job("none", task="classification").validate()


@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        ("centers", 0, r"centers must be >= 1, got 0"),
        ("epochs", 0, r"epochs must be >= 1, got 0"),
        ("patience", 0, r"patience must be >= 1, got 0"),
        ("test_fraction", 1.0, r"test_fraction must be in \(0, 1\), got 1.0"),
        ("test_fraction", 0.0, r"test_fraction must be in \(0, 1\), got 0.0"),
        ("holdout_fraction", 0.6, r"holdout_fraction must be in \[0, 0.5\]"),
        ("promotion_margin", 1.0, r"the promotion margin must be in \[0, 1\), got 1.0"),
        ("sample_rows", 3, r"sample_rows must be >= 4, got 3"),
        ("block", 0, r"block must be >= 1"),
        ("replay_block", 0, r"replay_block must be >= 1"),
        ("limit_margin", -1.0, r"limit_margin must be >= 0 \(inf disables the test\), got -1.0"),
        ("outlier_k", float("nan"), r"outlier_k must be > 0 \(inf disables the test\)"),
        ("outlier_floor", float("inf"), r"outlier_floor must be finite and >= 0"),
        ("forgetting", (1.0, 0.0), r"forgetting factors must be in \(0, 1\], got \[1.0, 0.0\]"),
        ("forgetting", (), r"forgetting factors must be in \(0, 1\], got \[\]"),
        ("residual_regularization", (1.0, float("inf")), r"residual λ multipliers must be finite and > 0"),
        ("dtype", "float16", r"dtype must be one of \('float32', 'float64'\), got 'float16'"),
        ("task", "juggling", r"task must be one of \('classification', 'inverse-dynamics'\)"),
    ],
)
def test_each_declared_range_is_checked(tmp_path, make_job, field, bad, message):
    """The job refuses a value outside its option's declared range (the one the CLI and the node
    show), before reading a bag; a value at either end of a closed range is accepted."""
    for name in ("bag", "check"):
        write_labeled_features(tmp_path / name, np.zeros((40, 3)), ["a"] * 40)
    with pytest.raises(ValueError, match=message):
        make_job("bag", **{"task": "classification", field: bad}).validate()
    option = next(o for o in job_options() if o.name == field)
    if option.range is not None and option.range.closed:
        gate = {"validation_bags": [str(tmp_path / "check")]}  # holdout_fraction 0 needs them
        for end in (option.range.low, option.range.high):
            value = type(option.default)(end)
            make_job("bag", task="classification", **gate, **{field: value}).validate()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lr", 20.0),
        ("lr", 1e-9),
        ("test_fraction", 0.95),
        ("test_fraction", 0.001),
        ("promotion_margin", 0.995),
        ("epochs", 200_000),
        ("centers", 2_000_000),
        ("patience", 2_000_000),
        ("limit_margin", float("inf")),
        ("outlier_k", float("inf")),
    ],
)
def test_the_job_allows_more_than_the_node(tmp_path, make_job, field, value):
    """The job's ranges are those it always had (the CLI's); the node's parameters are bounded
    more narrowly (a closed range, as a ROS parameter's is), and a value beyond them is the job's."""
    write_labeled_features(tmp_path / "bag", np.zeros((40, 3)), ["a"] * 40)
    make_job("bag", task="classification", **{field: value}).validate()
    option = next(o for o in job_options() if o.name == field)
    bounds = option.node_bounds()
    assert bounds is None or not bounds[0] <= value <= bounds[1]  # the node would refuse it


def test_holdout_fraction_zero_needs_validation_bags(tmp_path, make_job):
    for name in ("bag", "check"):
        write_labeled_features(tmp_path / name, np.zeros((40, 3)), ["a"] * 40)
    with pytest.raises(ValueError, match="the promotion gate needs held-out data"):
        make_job("bag", task="classification", holdout_fraction=0.0).validate()
    gate = {"holdout_fraction": 0.0, "validation_bags": [str(tmp_path / "check")]}
    make_job("bag", task="classification", **gate).validate()


class _OtherMachine(Group):
    """Two processes, the other one on another machine. Stands in for that machine, whose own
    filesystem cannot exist here: its all_gather answers with what the other process would send."""

    world_size = 2

    def __init__(self, rank: int, theirs: object) -> None:
        self.rank, self.theirs = rank, theirs

    def all_gather(self, obj: object) -> list[object]:
        return [obj, self.theirs] if self.rank == 0 else [self.theirs, obj]


def test_on_a_cluster_each_process_checks_only_the_files_it_reads(tmp_path, make_job):
    """Each machine holds only the bags of its share: the partition comes from the largest size any
    process sees; a process checks only its share's bags, the main process alone the outputs and
    the serving model."""
    for name in ("a", "b"):
        write_labeled_features(tmp_path / name, np.zeros((40, 3)), ["x"] * 40)
    # c and d: on the other machine only
    common = {"task": "classification", "objectives": ["gcv"]}
    job = make_job("a", "b", "c", "d", **common)
    assert job.shares() == [range(0, 4)]  # one process reads every bag
    big = float(sum(f.stat().st_size for f in (tmp_path / "a").rglob("*")))
    assert job.shares(_OtherMachine(0, [0.0, 0.0, big, big])) == [range(0, 2), range(2, 4)]
    job.validate(_OtherMachine(0, [0.0, 0.0, big, big]))  # c and d are the other process's to check
    with pytest.raises(ValueError, match="no such bag"):  # as the process that should read c and d
        job.validate(_OtherMachine(1, [big, big, 0.0, 0.0]))
    # outputs and serving model: the main process's to check, not another's
    elsewhere = {"out": "no such dir/m.llm", "serving": str(tmp_path / "none.llm")}
    make_job("c", "d", "a", "b", **elsewhere, **common).validate(_OtherMachine(1, [big, big, 0.0, 0.0]))
    with pytest.raises(ValueError):
        make_job("a", "b", **elsewhere, **common).validate()


def test_files_a_job_names_are_refused_unless_regular_and_within_their_bounds(tmp_path, make_job):
    """A FIFO or a device as URDF or model, a URDF over MAX_URDF_BYTES: refused before anything
    opens them, by check_request (stat only, the node's goal check) and by validate alike."""
    import os

    from lifelong_learning.core.files import MAX_URDF_BYTES, UnsafePathError

    write_labeled_features(tmp_path / "bag", np.zeros((4, 3)), ["a"] * 4)
    os.mkfifo(tmp_path / "fifo")
    big = tmp_path / "big.urdf"
    big.write_text("<robot/>")
    os.truncate(big, MAX_URDF_BYTES + 1)
    for fields, match in (
        ({"urdf": str(tmp_path / "fifo")}, "fifo is not a regular file"),
        ({"urdf": "/dev/zero"}, "/dev/zero is not a regular file"),
        ({"urdf": str(big)}, f"more than the {MAX_URDF_BYTES} allowed"),
        ({"urdf": str(tmp_path / "none.urdf")}, "no URDF file"),
        ({"init": str(tmp_path / "fifo")}, "fifo is not a regular file"),
        ({"serving": "/dev/zero"}, "/dev/zero is not a regular file"),
    ):
        job = make_job("bag", **fields)
        for check in (job.check_request, job.validate):
            with pytest.raises(ValueError, match=match) as raised:
                check()
            assert isinstance(raised.value, UnsafePathError) or "no URDF" in match


def test_check_request_opens_no_bag_and_names_only_the_bags_named_twice(tmp_path, make_job):
    write_labeled_features(tmp_path / "bag", np.zeros((4, 3)), ["a"] * 4)
    (mcap,) = (tmp_path / "bag").glob("*.mcap")
    mcap.write_bytes(mcap.read_bytes()[:100])  # truncated: found only by opening it
    job = make_job("bag", task="classification")
    job.check_request()
    with pytest.raises(ValueError, match="corrupt or truncated"):
        job.validate()
    with pytest.raises(ValueError, match="a bag is named twice") as raised:
        make_job(*["bag"] * 1000, task="classification").check_request()
    assert len(str(raised.value)) < 300, str(raised.value)[:300]
