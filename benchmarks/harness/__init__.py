"""What every benchmark shares: where it ran, a private ROS graph, a node under test, the seeds.

A benchmark script runs as ``python benchmarks/bench_X.py``, so ``benchmarks/`` is
``sys.path[0]`` and this package is imported as ``harness``:

- :mod:`harness.provenance`: the machine (CPU model, cores, Python), the commit and the load
  average, for the header of a report;
- :mod:`harness.graph`: a private ``ROS_DOMAIN_ID``, a node under test in its own process on the
  package's process supervisor (``lifelong_learning.nodes.supervisor``) with a peer node in this
  one, and the latency of its answers as percentiles;
- :mod:`harness.seeds`: one measurement per seed, timed, written as markdown and JSON.

Importing it imports neither rclpy nor torch: :class:`NodeUnderTest` imports rclpy when it starts.
"""

from harness.graph import Latencies, NodeUnderTest, param_args, percentiles, private_domain
from harness.provenance import (
    cpu_model,
    describe_machine,
    git_head,
    load_average,
    provenance_line,
    report_head,
    usable_cores,
)
from harness.seeds import per_seed_table, run_seeds, seeds_main

__all__ = [
    "Latencies",
    "NodeUnderTest",
    "cpu_model",
    "describe_machine",
    "git_head",
    "load_average",
    "param_args",
    "per_seed_table",
    "percentiles",
    "private_domain",
    "provenance_line",
    "report_head",
    "run_seeds",
    "seeds_main",
    "usable_cores",
]
