"""One measurement per seed: run them all, time them, write the report as markdown and JSON."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def run_seeds(
    seeds: Sequence[int],
    one_seed: Callable[[int], Any],
    report: Callable[[list, float], str],
    out: str | Path | None,
    *,
    json_default: Callable[[Any], Any] | None = None,
    flatten: bool = False,
) -> list:
    """``one_seed(seed)`` for every seed in order, then ``report(results, seconds)``.

    The report (markdown) is written to ``out`` and the results to ``out`` with the suffix
    ``.json`` (``json.dumps(results, indent=1, default=json_default)``), unless ``out`` is None;
    it is printed either way. ``flatten``: every ``one_seed`` returns a list of rows, and the
    results are those rows, seed after seed. Returns the results.
    """
    start = time.perf_counter()
    results: list = []
    for seed in seeds:
        result = one_seed(seed)
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
