"""One measurement per seed: run them all, time them, write the report as markdown and JSON."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: the measurement of the seeds run in worker processes (inherited by fork, so that it may be a closure)
_ONE_SEED: Callable[[int], Any] | None = None


def _measured(seed: int) -> Any:
    assert _ONE_SEED is not None
    return _ONE_SEED(seed)


def _each_seed(seeds: Sequence[int], one_seed: Callable[[int], Any], jobs: int) -> list:
    """``one_seed(seed)`` for every seed, in order; ``jobs`` > 1: that many seeds at once, each in a
    process of its own (forked: the seeds' results come back pickled, in the seeds' order)."""
    global _ONE_SEED
    if jobs <= 1 or len(seeds) <= 1:
        return [one_seed(seed) for seed in seeds]
    import multiprocessing

    _ONE_SEED = one_seed
    try:
        with multiprocessing.get_context("fork").Pool(min(jobs, len(seeds)), maxtasksperchild=1) as pool:
            return pool.map(_measured, seeds, chunksize=1)
    finally:
        _ONE_SEED = None


def run_seeds(
    seeds: Sequence[int],
    one_seed: Callable[[int], Any],
    report: Callable[[list, float], str],
    out: str | Path | None,
    *,
    json_default: Callable[[Any], Any] | None = None,
    flatten: bool = False,
    jobs: int = 1,
) -> list:
    """``one_seed(seed)`` for every seed in order, then ``report(results, seconds)``.

    The report (markdown) is written to ``out`` and the results to ``out`` with the suffix
    ``.json`` (``json.dumps(results, indent=1, default=json_default)``), unless ``out`` is None;
    it is printed either way. ``flatten``: every ``one_seed`` returns a list of rows, and the
    results are those rows, seed after seed. ``jobs`` > 1: that many seeds measured at once, each
    in a process of its own (what a seed times, it times beside the others). Returns the results.
    """
    start = time.perf_counter()
    results: list = []
    for result in _each_seed(seeds, one_seed, jobs):
        if flatten:
            results.extend(result)
        else:
            results.append(result)
    text = report(results, time.perf_counter() - start)
    if out is not None:
        path = Path(out)
        path.write_text(text)
        path.with_suffix(".json").write_text(json.dumps(results, indent=1, default=json_default))
    print(text)
    return results


def seeds_main(
    doc: str, one_seed: Callable[[int], Any], report: Callable[[list, float], str], out: str | Path
) -> None:
    """The command line of a benchmark that runs ``one_seed`` per seed: ``--seeds`` (default 0-5) and
    ``--out`` (default ``out``), then :func:`run_seeds`; ``doc``'s first line describes it."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--out", default=str(out))
    args = ap.parse_args()
    run_seeds(args.seeds, one_seed, report, args.out)


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
