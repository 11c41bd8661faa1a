"""Where and when a benchmark ran: the machine, the commit and the load, for a report's header."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

#: the checkout the benchmarks belong to
REPO = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def usable_cores() -> int:
    """The CPUs this process may run on (``nproc``)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def describe_machine() -> str:
    """Host, usable cores, CPU model and Python version, on one line."""
    return f"{platform.node()}: nproc={usable_cores()}, {cpu_model()}, Python {platform.python_version()}"


def git_head() -> str:
    """The short hash of the checkout's HEAD ("" outside a git checkout)."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
        )
    except OSError:
        return ""
    return result.stdout.strip()


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, ``"0.52 0.40 0.33"`` (``"? ? ?"`` where unknown)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "? ? ?"


def provenance_line() -> str:
    """``Git <hash>, load average before: <1 5 15 min>``: the first line of an appended report."""
    return f"Git {git_head()}, load average before: {load_average()}"


def report_head(title: str, command: str, seconds: float) -> list[str]:
    """A report's first lines: its ``title``, the ``command`` that wrote it, where and when it ran and
    how long it took, then a blank line."""
    return [
        f"# {title}",
        "",
        f"Command: `{command}`  ",
        f"Machine: {describe_machine()}. {provenance_line()}. Total time {seconds:.0f} s.",
        "",
    ]
