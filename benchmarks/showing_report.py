"""The report of benchmarks/bench_recognition_showing.py: its markdown tables, and what they show
against the goals of the issue (no ROS imports beyond the node modules' settings)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from harness import cpu_model, provenance_line  # benchmarks/harness (sys.path[0] is benchmarks/)
from showing_world import NEW, ROOT, TAUGHT, TEACH, TEST

from lifelong_learning.learners.novelty import DEFAULT_SCORE, SCORES
from lifelong_learning.learners.showing import DEFAULT_RULE, RULES
from lifelong_learning.learners.showings import QUESTION_NOVELTY
from lifelong_learning.nodes.feature_extractor import PARAMS as EXTRACTOR_PARAMS
from lifelong_learning.nodes.recognition_showings import NOVELTY_THRESHOLD

#: the share of taught showings answered at the novelty threshold of table 3
ANSWERED = 0.95


def separation(known: np.ndarray, new: np.ndarray) -> dict[str, float]:
    """How well novelties tell never-taught showings ``new`` from taught ones ``known`` (higher: more
    likely new): ``"auroc"``, and ``"flagged"``, the % of ``new`` above the novelty that answers
    :data:`ANSWERED` of the ``known``."""
    from sklearn.metrics import roc_auc_score

    known, new = np.asarray(known, dtype=float), np.asarray(new, dtype=float)
    y = np.r_[np.zeros(known.size), np.ones(new.size)]
    return {
        "auroc": float(roc_auc_score(y, np.r_[known, new])),
        "flagged": 100.0 * float(np.mean(new > np.quantile(known, ANSWERED))),
    }


#: the showing_change thresholds of table 5's grouping
CHANGE_THRESHOLDS = (0.2, 0.3, 0.4, 0.5)
#: the feature_extractor node's default normalisation of the features it publishes
PUBLISHED = next(spec.default for spec in EXTRACTOR_PARAMS if spec.name == "feature_normalisation")
#: the feature_extractor node's default copies of a frame pasted onto rooms seen before (0 or 1 here)
PASTE = next(spec.default for spec in EXTRACTOR_PARAMS if spec.name == "paste_copies")


def seed_values(results: list[dict], *path: str) -> list[float]:
    """Each seed's value at ``path`` (keys into its result)."""
    values = []
    for r in results:
        v = r
        for p in path:
            v = v[p]
        values.append(float(v))
    return values


def _mean(results: list[dict], *path: str) -> float:
    return float(np.mean(seed_values(results, *path)))


def _spread(results: list[dict], *path: str) -> str:
    """The lowest and highest seed's value of ``path``, as ``"seeds a–b"``."""
    values = seed_values(results, *path)
    return f"seeds {min(values):.3g}–{max(values):.3g}"


def per_seed(results: list[dict], args: argparse.Namespace) -> list[str]:
    """Table 0: the goals' figures seed by seed (each seed is another world: other objects, rooms,
    order; 15 test showings at 15 objects, so one showing is 6.7 points)."""
    small, large = str(min(args.objects)), str(max(args.objects))
    ask = f"asks when unsure (novelty > {QUESTION_NOVELTY}) or ambiguous (margin 0.3)"
    lines = [
        "",
        "## 0. Seed by seed",
        "",
        "Each seed is another world (objects, rooms, teaching order). Per showing at "
        f"{small} objects, one test showing is {100 / int(small):.1f} points.",
        "",
        f"| seed | per showing % ({small}) | per showing % ({large}) | AUROC per showing ({small}) | "
        f"flagged % | rare object % | teacher of every frame % | the robot asks: labels | "
        "the robot asks % |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        nov, asking, acc = r["novelty"][small][DEFAULT_SCORE], r["asking"], r["accuracy"]
        lines.append(
            f"| {r['seed']} | {acc[small][DEFAULT_RULE]:.1f} | {acc[large][DEFAULT_RULE]:.1f} | "
            f"{nov['AUROC per showing']:.3f} | {nov['flagged per showing %']:.1f} | "
            f"{r['rare']['α = auto: rare']:.1f} | "
            f"{asking['labels every frame of 3 showing(s)']['per showing %']:.1f} | "
            f"{asking[ask]['labels']:.0f} | {asking[ask]['per showing %']:.1f} |"
        )
    return lines


def summary(results: list[dict], args: argparse.Namespace) -> list[str]:
    """What the tables show against the goals, computed from them."""
    small, large = str(min(args.objects)), str(max(args.objects))
    acc = {
        n: {k: _mean(results, "accuracy", n, k) for k in ("per frame", DEFAULT_RULE)} for n in (small, large)
    }
    best = max(SCORES, key=lambda s: _mean(results, "novelty", small, s, "AUROC per showing"))
    auroc = _mean(results, "novelty", small, best, "AUROC per showing")
    flagged = _mean(results, "novelty", small, best, "flagged per showing %")
    everything = _mean(results, "asking", "labels every frame of 3 showing(s)", "per showing %")
    half = 3 * (args.taught // 3) * 15 / 2
    rules = [
        (name, _mean(results, "asking", name, "per showing %"), _mean(results, "asking", name, "labels"))
        for name in results[0]["asking"]
        if "questions" in results[0]["asking"][name]
    ]
    within = [r for r in rules if r[2] <= half] or rules
    ask_name, ask_acc, ask_labels = max(within, key=lambda r: (r[1], -r[2]))  # ties: the fewest labels
    cost = {n: _mean(results, "update cost", n, "amortized") for n in results[0]["update cost"]}
    floor = _mean(results, "update cost", next(iter(cost)), "dsyr")
    one, five = cost.values()
    rare, rare_one = _mean(results, "rare", "α = auto: rare"), _mean(results, "rare", "α = 1.0: rare")
    reached = {True: "reached", False: "not reached"}
    showing_ok = acc[small][DEFAULT_RULE] >= 85 and acc[large][DEFAULT_RULE] >= 70
    ask_ok = ask_acc >= everything and ask_labels <= half
    lines = [
        "## What it shows",
        "",
        f"- Per showing (rule `{DEFAULT_RULE}`): {acc[small][DEFAULT_RULE]:.1f} % at {small} objects "
        f"({_spread(results, 'accuracy', small, DEFAULT_RULE)}) and "
        f"{acc[large][DEFAULT_RULE]:.1f} % at {large} (per frame {acc[small]['per frame']:.1f} % and "
        f"{acc[large]['per frame']:.1f} %); the goals, 85 % and 70 %: {reached[showing_ok]}.",
        f"- The rare object (3 frames) per showing with the node's `alpha: auto`: {rare:.1f} % (α = 1: "
        f"{rare_one:.1f} %, at the others' cost); the goal, 50 %: {reached[rare >= 50]}.",
        f'- "I don\'t know": the best novelty score is `{best}`, AUROC {auroc:.3f} per showing at {small} '
        f"objects ({_spread(results, 'novelty', small, best, 'AUROC per showing')}), {flagged:.1f} % of "
        "never-taught showings flagged with 95 % of the taught answered "
        f"(goals 0.9 and 50 %: {reached[auroc >= 0.9 and flagged >= 50]}).",
        f"- Asking: with at most half the labels of a teacher who labels all three showings of each object "
        f"({everything:.1f} %), the best question rule ({ask_name}) reaches {ask_acc:.1f} % with "
        f"{ask_labels:.0f} labels (goal: the same accuracy, {reached[ask_ok]}).",
        f"- A taught frame's update, amortized: one λ {one / floor:.2f}× one `dsyr`, the node's five λ "
        f"{five / one:.2f}× one λ (goals ≤ 3× and ≤ 6×: {reached[one / floor <= 3 and five / one <= 6]}).",
    ]
    if "backbones" in results[0]:
        fps = _mean(results, "backbones", "efficientnet-lite0 int8", "images/s at 640x480")
        lines.append(
            f"- The default backbone (EfficientNet-Lite0 int8): {fps:.0f} images/s at 640×480 (floor 60"
            + ("; table 5, an earlier run)." if results[0].get("backbones measured") else ").")
        )
    return lines


def asking_table(results: list[dict], title: str, intro: str, seeds: bool = False) -> list[str]:
    """Table 4 (each seed's ``"asking"``): teachers against the robot's question rules, means over
    seeds; ``seeds``: with the seeds' range of the per-showing accuracy."""
    lines = [
        "",
        title,
        "",
        intro,
        "",
        "| teacher | labels given | questions | first showings asked % | per showing % |"
        + (" seeds |" if seeds else ""),
        "|---|---:|---:|---:|---:|" + ("---|" if seeds else ""),
    ]
    for name in results[0]["asking"]:
        asks = "questions" in results[0]["asking"][name]
        q = f"{_mean(results, 'asking', name, 'questions'):.1f}" if asks else "0"
        first = f"{_mean(results, 'asking', name, 'first showings asked %'):.1f}" if asks else "–"
        row = (
            f"| {name} | {_mean(results, 'asking', name, 'labels'):.0f} | {q} | {first} | "
            f"{_mean(results, 'asking', name, 'per showing %'):.1f} |"
        )
        if seeds:
            right = seed_values(results, "asking", name, "per showing %")
            row += f" {min(right):.1f}–{max(right):.1f} |"
        lines.append(row)
    return lines


def _asking_tables(results: list[dict], args: argparse.Namespace) -> list[str]:
    """Tables 4 and 4b: asking, and the calibration's smoothing."""
    lines = asking_table(
        results,
        "## 4. Asking: labels given against accuracy (15 objects, each shown three times, "
        f"{args.taught // 3} frames each)",
        "A teacher who labels every frame of the first 1, 2 or 3 showings of each object, against a robot "
        "that asks about a showing by the node's rule and learns its frames from the answer.",
    )
    lines += [
        "",
        "## 4b. The calibration's smoothing: counted by held-out samples or by classes (15 objects)",
        "",
        "`calibration_evidence` (learners/calibration.py): each held-out sample, or each class held out, "
        "counts as one answer in Laplace's rule. Threshold: the novelty at which 95 % of the taught "
        f"showings are answered; flagged: never-taught showings above it, and above the node's "
        f"`novelty_threshold` ({NOVELTY_THRESHOLD}); asked: the node's question rule (novelty > "
        f"{QUESTION_NOVELTY} or margin < 0.3) over three showings of a third of the frames taught.",
        "",
        "| counted by, frames taught | threshold | AUROC | flagged % | taught answered at "
        f"{NOVELTY_THRESHOLD} % | flagged at {NOVELTY_THRESHOLD} % | asked: labels | asked: per showing % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in results[0]["evidence"]:
        v = {k: _mean(results, "evidence", name, k) for k in results[0]["evidence"][name]}
        lines.append(
            f"| {name} | {v['threshold']:.3f} | {v['AUROC']:.3f} | {v['flagged %']:.1f} | "
            f"{v['taught answered at the node threshold %']:.1f} | "
            f"{v['flagged at the node threshold %']:.1f} | {v['asked labels']:.0f} | {v['asked %']:.1f} |"
        )
    return lines


def _choice_tables(results: list[dict]) -> list[str]:
    """Tables 5: grouping into showings, the pipeline's choices and the backbones."""
    lines = [
        "",
        "## 5. Grouping frames into showings by a scene change in the features",
        "",
        "Cosine distance of a frame to the mean of its showing's last 5 frames: frames of one showing "
        "split off (a false end) and first frames of the next object caught (an end), by threshold.",
        "",
        "| showing_change | frames split off % | next objects caught % |",
        "|---:|---:|---:|",
    ]
    for t in CHANGE_THRESHOLDS:
        split = _mean(results, "grouping", f"{t}: frames split off %")
        caught = _mean(results, "grouping", f"{t}: next objects caught %")
        lines.append(f"| {t} | {split:.1f} | {caught:.1f} |")
    for section, title in (
        ("frames", "Frames taught per showing"),
        ("normalisation", "Feature normalisation"),
        (
            "augmentation",
            "Augmentation of the taught frames (extra samples at teaching only; mirror, scale and shift, "
            "colour on the frames alone)",
        ),
    ):
        lines += [
            "",
            f"## 5. {title} (15 objects)",
            "",
            "| choice | per frame % | per showing % |",
            "|---|---:|---:|",
        ]
        for name in results[0]["choices"][section]:
            pf = _mean(results, "choices", section, name, "per frame")
            ps = _mean(results, "choices", section, name, DEFAULT_RULE)
            lines.append(f"| {name} | {pf:.1f} | {ps:.1f} |")
    if "backbones" in results[0]:
        lines += [
            "",
            "## 5. Backbones (15 objects; the world's crops at 160×160, then the network's input size)",
            "",
            "Taught with the frames alone (no pasted copies). images/s: the feature_extractor node's path "
            "(preprocessing and CNN, 2 threads, batches of 4) on 640×480 frames, measured in the same run "
            "(the machine is shared: compare within the column)."
            + (
                f" Not measured in this run (`--reuse-backbones`): the figures of an earlier run of the same "
                f"seeds ({results[0]['backbones measured'].rstrip('.')})."
                if results[0].get("backbones measured")
                else ""
            ),
            "",
            "| backbone | per frame % | per showing % | AUROC never taught, per showing | "
            "images/s at 640×480 |",
            "|---|---:|---:|---:|---:|",
        ]
        for name in results[0]["backbones"]:
            cells = [
                _mean(results, "backbones", name, k) for k in ("per frame", DEFAULT_RULE, "AUROC per showing")
            ]
            fps = _mean(results, "backbones", name, "images/s at 640x480")
            lines.append(f"| {name} | {cells[0]:.1f} | {cells[1]:.1f} | {cells[2]:.3f} | {fps:.0f} |")
    return lines


def _cost_tables(results: list[dict], jobs: int = 1) -> list[str]:
    """Tables 6-8: a taught frame's update, the annotated image and a paste; ``jobs`` > 1: each seed
    timed them while other seeds ran (said under table 6)."""
    beside = (
        f" Each seed timed these while {jobs - 1} other seed{'s' if jobs > 2 else ''} ran beside it "
        f"(`--jobs {jobs}`): the times of tables 6-8 are longer than in a run alone; compare only the "
        "ratios, taken side by side."
        if jobs > 1
        else ""
    )
    lines = [
        "",
        "## 6. A taught frame's update (d = 1280, 30 classes; each update interleaved with one BLAS `dsyr`)",
        "",
        "Amortized: the median over blocks of 8 consecutive updates of their mean (each block holds one "
        "sweep of the rows that waited for the factors, learners/recursive_rls.py; the median keeps the "
        "shared machine's other work out). Median: of single updates (most only queue the row)." + beside,
        "",
        "| learner | amortized ms | median ms | mean ms | dsyr ms | amortized / dsyr | amortized / one λ's |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = list(results[0]["update cost"])
    one = _mean(results, "update cost", names[0], "amortized")
    for name in names:
        cost = {k: _mean(results, "update cost", name, k) for k in ("amortized", "median", "mean", "dsyr")}
        cells = " | ".join(f"{1e3 * cost[k]:.3f}" for k in ("amortized", "median", "mean", "dsyr"))
        ratios = f"{cost['amortized'] / cost['dsyr']:.2f} | {cost['amortized'] / one:.2f}"
        lines.append(f"| {name} | {cells} | {ratios} |")
    if "annotate" in results[0]:
        drawn, cnn = (_mean(results, "annotate", k) for k in ("annotate ms", "CNN path ms"))
        lines += [
            "",
            "## 7. The annotated image (feature_extractor `annotate: true`, 640×480)",
            "",
            f"Drawing the box and the answer and converting to a sensor_msgs/Image: {drawn:.2f} ms per "
            f"frame, against {cnn:.2f} ms for the CNN path of the same frame; nothing is drawn while "
            "nobody subscribes to `~/annotated`.",
        ]
    if "annotate" in results[0] and "paste ms" in results[0]["annotate"]:
        pasted = _mean(results, "annotate", "paste ms")
        lines += [
            "",
            "## 8. A frame pasted onto a room seen before (feature_extractor `paste_copies: 1`, 640×480)",
            "",
            f"The paste (mask grown, brought to the frame's size and softened; the room blended in the "
            f"crop's square): "
            f"{pasted:.2f} ms per moving frame, and the copy's CNN pass, {cnn:.2f} ms: with `crop: motion` "
            f"a moving frame costs about {(2 * cnn + pasted) / cnn:.1f}× the CNN path of a frame alone.",
        ]
    return lines


def _shown(path: Path) -> str:
    """``path`` as a command line of the report names it: from the repository's root when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def markdown(results: list[dict], args: argparse.Namespace, seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    reused, jobs = args.reused, args.jobs
    more = "" if args.backbones or reused else " --no-backbones"
    if reused:
        more += f" --reuse-backbones {_shown(Path(args.reuse_backbones))}"
    if jobs > 1:
        more += f" --jobs {jobs}"
    out = Path(args.out).resolve()
    if out != (ROOT / "docs/benchmarks/recognition-showing.md").resolve():
        more += f" --out {_shown(out)}"
    lines = [
        '# Recognition a person can trust: per showing, "I don\'t know", asking',
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_showing.py --seeds {seeds} "
        f"--objects {' '.join(map(str, args.objects))} --taught {args.taught}{more}`  ",
        f"Machine: {cpu_model()}. {provenance_line()}. Total time {seconds:.0f} s.",
        "",
        f"Per seed: {TAUGHT} objects, each shown for {TEACH} frames (320×240) in a teaching room and {TEST} "
        f"in a test room, and {NEW} objects never taught shown in a test room "
        "(lifelong_learning/sim/showing.py); every frame cut by the motion crop; EfficientNet-Lite0 int8 "
        f"features, normalised `{PUBLISHED}` as the feature_extractor node publishes them. Objects taught "
        f"one at a time with {args.taught} frames each ({args.taught / 15:.1f} s of a showing at 15 Hz), "
        + (
            "each with its copy pasted onto the empty room of an earlier teaching session (the "
            "feature_extractor's `paste_copies: 1`), "
            if PASTE
            else ""
        )
        + "to the "
        f"object_recognition node's learner (default parameters); mean over {len(results)} seed(s).",
        "",
        *summary(results, args),
        *per_seed(results, args),
        "",
        "## 1. Per frame and per showing (% right on the test room)",
        "",
        "| objects | per frame | " + " | ".join(f"per showing, `{r}`" for r in RULES) + " |",
        "|---:|---:|" + "---:|" * len(RULES),
    ]
    for n in args.objects:
        cells = [f"{_mean(results, 'accuracy', str(n), k):.1f}" for k in ("per frame", *RULES)]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## 2. The rare object (3 labelled frames) per showing, by recoding α",
        "",
        "15 objects; the rare one is each of the last 5 taught in turn (5 runs per seed). Rule `mean_proba`.",
        "",
        "| α | rare object % | the others % |",
        "|---|---:|---:|",
    ]
    for alpha in ("auto", 0.5, 1.0):
        lines.append(
            f"| {alpha} | {_mean(results, 'rare', f'α = {alpha}: rare'):.1f} | "
            f"{_mean(results, 'rare', f'α = {alpha}: others'):.1f} |"
        )
    for n in args.objects:
        lines += [
            "",
            f'## 3. "I don\'t know" at {n} objects: {NEW} never-taught objects against the taught ones',
            "",
            "Test rooms for both. Flagged: the share of never-taught frames (showings) whose novelty is "
            f"above the threshold at which {100 * ANSWERED:.0f} % of the taught ones are answered; the "
            "threshold is the median over seeds.",
            "",
            "| score | AUROC per frame | AUROC per showing | flagged per frame % | flagged per showing % | "
            "threshold per showing |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for score in SCORES:
            cells = [
                f"{_mean(results, 'novelty', str(n), score, k):.3f}"
                for k in ("AUROC per frame", "AUROC per showing")
            ]
            cells += [
                f"{_mean(results, 'novelty', str(n), score, k):.1f}"
                for k in ("flagged per frame %", "flagged per showing %")
            ]
            thr = np.median([r["novelty"][str(n)][score]["threshold per showing"] for r in results])
            lines.append(f"| `{score}` | " + " | ".join(cells) + f" | {thr:.4g} |")
    lines += _asking_tables(results, args) + _choice_tables(results) + _cost_tables(results, jobs)
    return "\n".join(lines) + "\n"
