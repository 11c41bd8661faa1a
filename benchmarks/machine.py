"""What machine a benchmark ran on, for the header of its markdown table."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or what platform knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def describe_machine() -> str:
    """Host, usable cores, CPU model and Python version, on one line."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.node()}: nproc={cores}, {cpu_model()}, Python {platform.python_version()}"


def per_seed_table(results: list[dict], fmt: str) -> list[str]:
    """Markdown rows ``| model | seed … | mean |`` of every non-detail key of ``results`` (one dict
    per seed, with its ``"seed"``), values formatted with ``fmt`` (e.g. ``".4f"``)."""
    keys = [k for k in results[0] if k != "seed" and not k.endswith("details")]
    lines = [
        "| model | " + " | ".join(f"seed {r['seed']}" for r in results) + " | mean |",
        "|---|" + "---:|" * (len(results) + 1),
    ]
    for key in keys:
        values = [r[key] for r in results]
        cells = " | ".join(format(v, fmt) for v in values)
        lines.append(f"| {key} | {cells} | {format(sum(values) / len(values), fmt)} |")
    return lines
