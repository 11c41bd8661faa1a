"""ROS 2 node: incremental object recognition (thesis ch. 7, Algorithm 2) on feature vectors.

Subscribes (topic names relative, remappable):
- ``features`` (lifelong_learning/Features, sensor-data QoS): each one is classified and
  answered on ``prediction`` with the same header.
- ``labeled_features`` (lifelong_learning/LabeledFeatures, reliable): training samples; a
  label never seen before adds a class at once, without retraining.
- ``pasted_features`` (lifelong_learning/Features, reliable): frames pasted onto other rooms by the
  feature_extractor (``paste_copies``), with their frame's header: learned with their frame when it is
  taught (labelled, or its showing answered; whichever comes first), never classified, not scored
  (a model in trial learns them too, unscored).

Publishes ``prediction`` (lifelong_learning/Prediction): the highest-scoring class
(``top_label``), its calibrated confidence (the probability that it is right: temperature scaling
fitted on the classifier's held-out validation samples, see ``learners/model_selection.py``), the answer
``label`` (``top_label``, or "" = unknown when the confidence is below ``unknown_threshold``; ""
while no class is known), every known label and its raw (recoded) score. Publishes
``learned_features`` (lifelong_learning/LabeledFeatures, reliable): every sample it learns that no
``labeled_features`` message carried (a showing's frames taught by a later label or an answer,
pasted copies), with its frame's stamp, so that a bag of both topics holds all it learned (a
retraining reads a frame found on both once: :mod:`~lifelong_learning.io.labeled_features`).

Services (besides ``~/save_model``, ``~/load_model``, ``~/reset`` of the learner base):
``~/predict`` (lifelong_learning/Predict) and ``~/info`` (lifelong_learning/GetClassifierInfo:
classes, counts, chosen λ and α, validation accuracy per λ candidate). Undoing teaching, exactly
(:mod:`~lifelong_learning.learners.unlearning`, on the last ``keep_samples`` samples):
``~/forget_class`` (ForgetClass), ``~/undo_teaching`` (UndoTeaching: the last teaching episode, or
the last N samples), ``~/rename_class`` (RenameClass); each serves an edited copy, keeps the model it
replaces for ``~/rollback``, writes the checkpoint, and is refused (counted: ``unlearning
refused``) without changing anything when it cannot be done.

What it refuses (:class:`~lifelong_learning.learners.recognition_gate.RecognitionGate`, the
limits are parameters): a wrong dimension, NaN/Inf, a feature norm above ``max_feature_norm``
or above ``feature_norm_factor`` × the median of the recent accepted labeled samples (inputs
to classify too: they are not answered), a label that is empty, longer than
``max_label_length`` or holds an unprintable character (NUL included: the label is checked
against the serialized message, because rclpy cuts a string at NUL), and a new class beyond
``max_classes``; a model file holding more classes or a refused label is not loaded. Each
refusal is counted per reason (``/diagnostics``: ``rejected: <reason>``), warned about
(rate-limited) and leaves the model untouched; the node keeps running. ``~/reset`` clears the
model and the norm statistics. The model is checkpointed atomically every
``checkpoint_interval_s`` and on shutdown, and restored on start (see
:class:`~lifelong_learning.nodes.learner.LearnerNode`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.lifecycle import LifecycleState, TransitionCallbackReturn
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from std_msgs.msg import Header

from lifelong_learning.core.prequential import PrequentialClassification
from lifelong_learning.learners.model_selection import RECODING_SHRINK
from lifelong_learning.learners.recognition_gate import RecognitionGate, Refusal, label_problem
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.showing import FrameAnswer, answer_frame
from lifelong_learning.learners.truncation import ScoreBounds
from lifelong_learning.msg import Features, LabeledFeatures, LearningMetrics, Prediction
from lifelong_learning.nodes.base import ParamSpec
from lifelong_learning.nodes.learner import LearnerNode
from lifelong_learning.nodes.learning_metrics import message_from_report
from lifelong_learning.nodes.recognition_shadow import RecognitionOps
from lifelong_learning.nodes.recognition_showings import COPY_REFUSED, MAX_COPIES, SHOWING_PARAMS, ShowingDesk
from lifelong_learning.nodes.runner import run_node
from lifelong_learning.nodes.shadow import ShadowMonitor, shadow_params
from lifelong_learning.serving import Outcome
from lifelong_learning.srv import ForgetClass, GetClassifierInfo, Predict, RenameClass, UndoTeaching

#: classes removed by the node's edits whose pasted copies are still refused (the latest kept)
MAX_GONE_CLASSES = 1024

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "features_topic",
        "features",
        "lifelong_learning/Features to classify (sensor-data QoS).",
    ),
    ParamSpec(
        "labeled_features_topic",
        "labeled_features",
        "lifelong_learning/LabeledFeatures to learn from (reliable).",
    ),
    ParamSpec(
        "pasted_features_topic",
        "pasted_features",
        "lifelong_learning/Features in (reliable): frames pasted onto other rooms (feature_extractor's "
        "paste_copies), learned with their frame (same stamp) when it is taught; '' disables.",
    ),
    ParamSpec(
        "learned_features_topic",
        "learned_features",
        "lifelong_learning/LabeledFeatures out (reliable): every sample learned that no message on "
        "labeled_features carried (a showing's frames taught by a later label or an answer, or under "
        "its own answer with learn_confident_showings; pasted copies), with its frame's stamp, so that "
        "a bag holds all the node learned; '' disables.",
    ),
    ParamSpec("prediction_topic", "prediction", "lifelong_learning/Prediction output."),
    ParamSpec(
        "lambdas",
        [0.1, 1.0, 10.0, 100.0, 1000.0],
        "Regularization λ candidates (one RLS per candidate, best on held-out samples); one value: fixed λ.",
    ),
    ParamSpec(
        "alpha",
        "auto",
        "Recoding exponent: a number in [0, 1] (0 plain RLSC, 1 full recoding of the classes at or below "
        "the median count; those above it shrunk by at most (median/count)^recoding_shrink) or 'auto' "
        "(thesis §7.6.3).",
    ),
    ParamSpec(
        "recoding_shrink",
        RECODING_SHRINK,
        "The largest exponent by which a class taught more often than the median class is shrunk: "
        "(median/count)^min(α, recoding_shrink); 1 is the thesis's recoding, under which an object shown "
        "again and again became the one least recognised in other rooms (docs/recognition.md). In [0, 1]; "
        "a checkpoint keeps its own.",
        bounds=(0.0, 1.0),
    ),
    ParamSpec(
        "alpha_grid",
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        "α values the 'auto' heuristic chooses from (must contain 0).",
    ),
    ParamSpec(
        "validation_every",
        6,
        "With several λ or alpha 'auto': every n-th labeled sample is held out for validation.",
        bounds=(2, 1000),
    ),
    ParamSpec(
        "min_class_count",
        20,
        "Training samples a class needs to count as well-represented in the α heuristic.",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "max_validation", 300, "Capacity of the validation buffer (class-balanced).", bounds=(1, 1000000)
    ),
    ParamSpec(
        "selection_every",
        0,
        "0: every λ candidate learns every sample (exact selection, thesis §7.6.3). k > 0: one factor "
        "learns (one λ's cost per sample), the others are rebuilt from it and λ, α chosen again every k "
        "training samples (docs/benchmarks/engine.md).",
        bounds=(0, 1000000),
    ),
    ParamSpec(
        "keep_samples",
        1000,
        "Last training samples kept for exact unlearning (~/forget_class, ~/undo_teaching; "
        "2 x keep_samples x n_features float32 in memory, half that in the checkpoint); 0 keeps none.",
        bounds=(0, 1000000),
    ),
    ParamSpec("n_features", 0, "Feature dimension; 0: set by the first labeled sample.", bounds=(0, 100000)),
    ParamSpec(
        "max_feature_norm",
        1000.0,
        "Inputs (labeled or to classify) whose Euclidean norm exceeds this are refused "
        "(EfficientNet-Lite0 features: at most 6·√1280 ≈ 215, 10-22 measured).",
        bounds=(1e-06, 1e12),
    ),
    ParamSpec(
        "feature_norm_factor",
        10.0,
        "Inputs whose norm exceeds this times the median norm of the recent accepted labeled samples "
        "are refused (once feature_norm_min_samples are known); 0 disables.",
        bounds=(0.0, 1e6),
    ),
    ParamSpec(
        "feature_norm_min_samples",
        20,
        "Accepted labeled samples needed before feature_norm_factor applies.",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "max_classes",
        256,
        "Most classes the model may hold; a labeled sample of a new class beyond it is refused.",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "max_label_length",
        64,
        "Most characters of a label (after stripping surrounding whitespace); longer ones are refused.",
        bounds=(1, 4096),
    ),
    ParamSpec(
        "truncate_scores",
        False,
        "Bound the published scores and the confidence as KTR3 bounds its predictor: each class's score "
        "to what its 0/1 targets allow, [0, its recoding weight]; the answer's class is unchanged; the "
        "scores clipped are counted in diagnostics ('scores truncated').",
    ),
    ParamSpec(
        "calibration_evidence",
        "classes",
        "What one independent answer is in the smoothing of the confidence's calibration: 'classes' "
        "(each class held out: its held-out frames are near copies from the same showings) or "
        "'samples' (each held-out sample, for independent views); docs/benchmarks/recognition-showing.md.",
    ),
    ParamSpec(
        "unknown_threshold",
        0.0,
        "Answers whose calibrated confidence is below this get label '' (unknown; top_label still names "
        "the best class); 0 always answers the best class. In [0, 1].",
        bounds=(0.0, 1.0),
    ),
    *shadow_params(60.0, 60.0),
    *SHOWING_PARAMS,
)


def label_arrived_whole(raw: bytes, label: str) -> bool:
    """Whether ``label`` (decoded by rclpy) is the whole string that ends the serialized message
    ``raw``: rclpy cuts a string at its first NUL and replaces invalid UTF-8, so a label that was
    altered on the way does not re-encode to the CDR string ``uint32 length + bytes + NUL`` at the
    end of ``raw`` (up to 3 bytes of final padding). Encodings other than plain CDR / XCDR2: True."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] not in (0, 1, 6, 7):  # CDR / PLAIN_CDR2, BE / LE
        return True
    body = label.encode("utf-8", "surrogatepass")
    encoded = struct.pack("<I" if raw[1] & 1 else ">I", len(body) + 1) + body + b"\0"
    return any(raw.endswith(encoded, 4, len(raw) - pad) for pad in range(4))


def _calibration_text(model: IncrementalRLSC) -> str:
    """How the confidence is calibrated now, for diagnostics."""
    t, n = model.calibration_
    if n == 0:
        return f"none yet (plain softmax; {model.n_validation_} validation samples)"
    return f"temperature {1.0 / t:.3g} on {n} validation samples"


class ObjectRecognitionNode(LearnerNode):
    """Features → Prediction; LabeledFeatures → incremental RLSC update."""

    model_class = IncrementalRLSC
    retraining_task = "classification"
    MAIN_STREAMS = ("features",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("object_recognition", PARAMS, **kwargs)
        p = self.params
        alpha = str(p["alpha"]).strip()
        self._alpha: float | str = "auto" if alpha == "auto" else float(alpha)
        self._model_kwargs = {
            "lambdas": [float(v) for v in p["lambdas"]],
            "alpha": self._alpha,
            "alpha_grid": [float(v) for v in p["alpha_grid"]],
            "validation_every": int(p["validation_every"]),
            "min_class_count": int(p["min_class_count"]),
            "max_validation": int(p["max_validation"]),
            "n_features": int(p["n_features"]) or None,
            "selection_every": int(p["selection_every"]),
            "keep_samples": int(p["keep_samples"]),
            "calibration_evidence": str(p["calibration_evidence"]),
            "recoding_shrink": float(p["recoding_shrink"]),
        }
        IncrementalRLSC(**self._model_kwargs)  # fail at start on bad parameters
        self.unknown_threshold = float(p["unknown_threshold"])
        self.bounds = ScoreBounds(bool(p["truncate_scores"]))
        if not 0.0 <= self.unknown_threshold <= 1.0:
            raise ValueError(f"unknown_threshold must be in [0, 1], got {self.unknown_threshold}")
        self.gate = RecognitionGate(
            max_feature_norm=float(p["max_feature_norm"]),
            feature_norm_factor=float(p["feature_norm_factor"]),
            norm_min_samples=int(p["feature_norm_min_samples"]),
            max_classes=int(p["max_classes"]),
            max_label_length=int(p["max_label_length"]),
        )
        self.prediction_pub = self.create_overridable_publisher(Prediction, p["prediction_topic"], 10)
        # deep enough for what one label or answer teaches at once: a showing's frames and their copies
        topic, burst = p["learned_features_topic"], int(p["max_showing_frames"]) * (1 + MAX_COPIES)
        self.learned_pub = self.create_overridable_publisher(LabeledFeatures, topic, burst) if topic else None
        # counted: features published but never processed show as "features lost" in diagnostics
        self.create_counted_subscription(
            Features, p["features_topic"], self._on_features, qos_profile_sensor_data, stream="features"
        )
        # with the bytes: the label is checked against the bytes that arrived (rclpy cuts it at NUL)
        self.create_counted_subscription(
            LabeledFeatures,
            p["labeled_features_topic"],
            self._on_labeled,
            QoSProfile(depth=100),
            stream="labeled_features",
            keep_bytes=True,
        )
        if p["pasted_features_topic"]:
            self.create_counted_subscription(
                Features,
                p["pasted_features_topic"],
                self._on_pasted,
                QoSProfile(depth=100),
                stream="pasted_features",
            )
        self.metrics.accumulator = PrequentialClassification(float(p["metrics_window_s"]))
        # models in shadow and canary, the drift alarm: fed where taught samples are learned
        self.shadow = ShadowMonitor(self, RecognitionOps(self.gate))
        self.desk = ShowingDesk(self)  # showings, their answers, the questions (recognition_showings.py)
        #: classes forgotten, renamed away, undone whole or reset by this node's edits (model lock held),
        #: the last :data:`MAX_GONE_CLASSES`, oldest first: a pasted copy never brings one back
        #: (:meth:`learn`); a taught frame does
        self.gone_classes: dict[str, None] = {}
        self.start_learner()

    # ---------------------------------------------------------------- LearnerNode hooks
    def configure_learner(self) -> None:
        self.build_model()
        with self.model_lock:
            self.gate.seed(self.model)
            self._adopt(self.model)  # a checkpoint's own bound and calibration evidence too
            n = len(self.model.classes_)
        self.create_configured_service(Predict, "~/predict", self._on_predict)
        self.create_configured_service(GetClassifierInfo, "~/info", self._on_info)
        self.create_configured_service(ForgetClass, "~/forget_class", self._on_forget_class)
        self.create_configured_service(UndoTeaching, "~/undo_teaching", self._on_undo_teaching)
        self.create_configured_service(RenameClass, "~/rename_class", self._on_rename_class)
        self.desk.create_services()
        self.get_logger().info(f"object recognition ready, {n} classes known")

    def parameter_conflicts(self, model: IncrementalRLSC) -> list[str]:
        wanted = self._model_kwargs
        saved = {
            "lambdas": model.lambdas.tolist(),
            "alpha": model.alpha,
            "recoding_shrink": model.recoding_shrink,
            "n_features": model.n_features_in_,
            "selection_every": model.selection_every,
        }
        conflicts = []
        for name, value in saved.items():
            want = wanted[name]
            if name == "n_features" and (want is None or value is None):
                continue
            if value != want:
                conflicts.append(f"{name}: checkpoint {value!r}, parameter {want!r}")
        return conflicts

    def new_model(self) -> IncrementalRLSC:
        return IncrementalRLSC(**self._model_kwargs)

    def reset_model(self) -> IncrementalRLSC:
        """A new model that remembers everything the serving one knew as taken back: a retraining
        that continues from it does not learn the bags' samples from before the reset again
        (learners/taken_back.py)."""
        fresh, old = self.new_model(), self.serving.model
        return fresh if old is None else fresh.remember_taken_back(old.everything_taken_back())

    def check_model(self, model: IncrementalRLSC) -> None:
        self.gate.check_model(model)  # no more classes, no label, than the node would learn
        want = self._model_kwargs["n_features"]
        if want is None and self.model is not None:  # a reload: the serving model's dimension
            with self.model_lock:
                want = self.model.n_features_in_
        if want is not None and model.n_features_in_ not in (None, want):
            raise ValueError(f"model has {model.n_features_in_} input features, this node expects {want}")

    def catch_up_model(self, model: IncrementalRLSC, serving: IncrementalRLSC) -> IncrementalRLSC:
        """What the serving model took back (undone, forgotten, renamed, reset) since ``model`` was
        made is taken back from ``model`` too, or it is refused (learners/unlearning.py's
        ``caught_up``): a reload or a promotion never brings back what the user took back, unless a
        person loads the file ``as_is``."""
        try:
            return model.caught_up(serving.taken_back_, serving.classes_)
        except ValueError as exc:
            raise ValueError(f"{exc} (~/load_model with as_is: true serves the file as it is)") from exc

    # ---------------------------------------------------------------- classification
    def _classify(self, data: Any) -> FrameAnswer | Refusal:
        """The frame's answer (learners/showing.py), or why the input is refused; its label is ""
        (unknown) when novel or the confidence is below ``unknown_threshold``."""
        x = np.asarray(data, dtype=np.float64)
        with self.model_lock:
            model = self.model
            refusal = self.gate.check_features(x, model.n_features_in_)
            if refusal is not None:
                return refusal
            try:
                desk = self.desk
                bound = self.bounds.bound(model) if self.bounds.enabled else None
                return answer_frame(
                    model, x, self.unknown_threshold, desk.novelty_threshold, desk.score, bound
                )
            except ValueError as exc:  # the model's own checks (e.g. a feature map's output)
                return Refusal("bad features", str(exc))

    def _on_features(self, msg: Features) -> None:
        self.stats.arrived("features")
        t = time.perf_counter()
        answer = self._classify(msg.data)
        if isinstance(answer, Refusal):
            self.reject(answer.reason, f"Features: {answer.detail}")
            return
        self.prediction_pub.publish(
            Prediction(
                header=msg.header,
                label=answer.label,
                top_label=answer.top_label,
                confidence=answer.confidence,
                labels=answer.labels,
                scores=answer.scores,
                novelty=answer.novelty,
            )
        )
        self.stats.timed("predict", time.perf_counter() - t)
        self.desk.on_frame(msg.header, np.asarray(msg.data, dtype=np.float64))

    def _on_labeled(self, msg: LabeledFeatures, raw: bytes) -> None:
        self.stats.arrived("labeled_features")
        if not label_arrived_whole(raw, msg.label):
            self.reject("bad label", f"the label holds NUL or invalid UTF-8 (arrived as {msg.label[:40]!r})")
            return
        x, label = np.asarray(msg.data, dtype=np.float64), msg.label.strip()
        if not self.desk.taught(msg.header) and self.learn(x, label):
            self.desk.on_labeled(msg.header, x, label)

    def _on_pasted(self, msg: Features) -> None:
        """A frame pasted onto another room: checked as an input (refusals counted), then learned with
        its frame (recognition_showings.py); ignored while no class is known (no dimension to check)."""
        self.stats.arrived("pasted_features")
        x = np.asarray(msg.data, dtype=np.float64)
        with self.model_lock:
            n_features = self.model.n_features_in_
            refusal = None if n_features is None else self.gate.check_features(x, n_features)
        if refusal is not None:
            self.reject(refusal.reason, f"pasted Features: {refusal.detail}")
        elif n_features is not None:
            self.desk.on_pasted(msg.header, x)

    def learn(
        self,
        x: np.ndarray,
        label: str,
        observed: bool = True,
        stamp: tuple[int, int] | None = None,
        source: str = "LabeledFeatures",
    ) -> bool:
        """Learn one labeled sample unless the gate or the model refuses it (counted); True if learned.
        ``observed``: a frame of the world (scored prequentially, and by a model in trial), not a
        pasted copy (learned by a model in trial too, unscored). ``stamp``: the frame's, for a sample
        that no labeled_features message carried (a showing's frame, a copy): published on
        ``learned_features`` once learned; a copy is refused if its frame was unlearned since (checked
        under the lock the edits change the model under). ``source``: what the sample is, in the
        message of a refusal."""
        t = time.perf_counter()
        serving = self.serving
        with self.model_lock:
            model = serving.model
            if model is None:  # released by cleanup while an answer was being taught
                refusal = Refusal("no model", "no model serves: the node is not configured")
            else:
                refusal = self.gate.check_labeled(x, label, model)
            if refusal is None and not observed and label in self.gone_classes and not model.has_class(label):
                # a copy of a frame taught before its class was forgotten (renamed, undone): it never
                # brings the class back (checked under the lock the edits change the model under)
                refusal = Refusal(
                    COPY_REFUSED, f"its class {label!r} was forgotten, renamed, undone or reset since"
                )
            elif refusal is None and not observed and stamp is not None and stamp in self.desk.unlearned:
                refusal = Refusal(
                    COPY_REFUSED, f"the frame stamped {stamp} was unlearned since (undo, reset)"
                )
            if refusal is None:
                before = self._predicted_before_learning(model, x) if observed else None
                try:
                    model.partial_fit(x, [label])
                except ValueError as exc:
                    refusal = Refusal("bad labeled features", str(exc))
            if refusal is not None:
                self.reject(refusal.reason, f"{source}: {refusal.detail}")
                return False
            self.gate.accepted(x)
            serving.count_updates()
            if observed:
                self.gone_classes.pop(label, None)  # taught again
            classes = [str(c) for c in model.classes_.tolist()]
        self.stats.timed("update", time.perf_counter() - t)
        if observed:
            self._score_taught(label, before, classes)
            self.shadow.feed_sample(model, x, label, before)  # the model in a trial predicts, then learns
        else:
            self.shadow.feed_unscored(model, x, label)  # the model in a trial learns it too
        if stamp is not None and self.learned_pub is not None:
            header = Header(stamp=Time(sec=stamp[0], nanosec=stamp[1]))
            self.learned_pub.publish(LabeledFeatures(header=header, data=x.astype(np.float32), label=label))
        return True

    # ---------------------------------------------------------------- ~/learning_metrics
    @staticmethod
    def _predicted_before_learning(model: IncrementalRLSC, x: np.ndarray) -> str | None:
        """The class ``model`` gives ``x`` before learning it (None: no class known yet)."""
        if len(model.classes_) == 0:
            return None
        try:
            scores = model.decision_function(x)[0]
        except ValueError:
            return None
        return str(model.classes_[int(np.argmax(scores))])

    def _score_taught(self, label: str, predicted: str | None, classes: list[str]) -> None:
        """Count a taught sample's prequential error (not when no class was known to predict it)."""
        metrics = self.metrics
        with metrics.lock:
            metrics.names = classes
            if predicted is not None:
                metrics.accumulator.add(metrics.now(), label, model=predicted)

    def learning_metrics(self) -> LearningMetrics:
        metrics = self.metrics
        report = metrics.accumulator.report(metrics.now(), classes=metrics.names)
        return message_from_report(report, metrics.names, metrics.accumulator.window_s)

    # ---------------------------------------------------------------- services
    def _on_predict(self, request: Predict.Request, response: Predict.Response) -> Predict.Response:
        answer = self._classify(request.data)
        if isinstance(answer, Refusal):
            self.reject(answer.reason, f"~/predict: {answer.detail}")
            response.success, response.message = False, f"refused ({answer.reason}): {answer.detail}"
            return response
        response.success = True
        response.message = "" if answer.labels else "no class learned yet"
        response.label, response.top_label, response.confidence = (
            answer.label,
            answer.top_label,
            answer.confidence,
        )
        response.labels, response.scores = answer.labels, answer.scores
        return response

    def _on_info(
        self, request: GetClassifierInfo.Request, response: GetClassifierInfo.Response
    ) -> GetClassifierInfo.Response:
        with self.model_lock:
            m = self.model
            response.classes = [str(c) for c in m.classes_.tolist()]
            response.counts = [int(c) for c in m.seen_counts_]
            response.samples_seen = int(m.n_samples)
            response.regularization = m.lambda_
            response.recoding_exponent = m.alpha_
            response.lambda_candidates = m.lambdas.tolist()
            response.validation_accuracy = m.validation_accuracy_.tolist()
        response.success, response.message = True, ""
        return response

    # ---------------------------------------------------------------- unlearning
    def _edit(
        self, service: str, why: str, change: Callable[[IncrementalRLSC], tuple[str, Callable[[], None]]]
    ) -> tuple[bool, str]:
        """Serve a copy of the model changed by ``change``, keeping the model it replaces for
        ``~/rollback`` (:meth:`ServingCore.edit`), then checkpoint; a refusal is counted (``unlearning
        refused``) and changes nothing (learners/unlearning.py). ``change`` returns a note and what
        the node then keeps about the edit (the copies it refuses): run in the swap's step, under the
        model lock, only when the edited model serves."""
        kept: list[Callable[[], None]] = []

        def edited(model: IncrementalRLSC) -> tuple[IncrementalRLSC, str]:
            copy = model.clone()
            note, keep = change(copy)
            kept.append(keep)
            return copy, note

        def before_swap() -> None:
            for keep in kept:
                keep()

        ok, message = self.serving.edit(edited, why, before_swap=before_swap)
        if not ok:
            self.reject("unlearning refused", f"{service}: {message}")
            return False, f"refused: {message}"
        self.checkpoint()
        return True, message

    def _gone(self, labels: Iterable[str]) -> None:
        """``labels`` are no longer classes of the model (model lock held): their copies are refused.
        Copies come within a few frames of their own, so the oldest beyond the bound are let go."""
        for label in labels:
            self.gone_classes.pop(label, None)
            self.gone_classes[label] = None
        while len(self.gone_classes) > MAX_GONE_CLASSES:
            del self.gone_classes[next(iter(self.gone_classes))]

    def _on_forget_class(self, request: ForgetClass.Request, response: ForgetClass.Response) -> Any:
        label = request.label.strip()

        def forget(model: IncrementalRLSC) -> tuple[str, Callable[[], None]]:
            n = int(model.seen_counts_[model.classes_.tolist().index(label)]) if model.has_class(label) else 0
            model.forget_class(label)
            return f"forgot class {label!r} ({n} samples)", lambda: self._gone([label])

        response.success, response.message = self._edit("~/forget_class", "forget", forget)
        return response

    def _on_undo_teaching(self, request: UndoTeaching.Request, response: UndoTeaching.Response) -> Any:
        undone: list[str] = []

        def undo(model: IncrementalRLSC) -> tuple[str, Callable[[], None]]:
            numbers = model.teaching_episode(int(request.last_n))
            labels = [str(c) for c in model.labels_of_numbers(numbers)]
            model.unlearn_numbers(numbers)
            gone = [c for c in labels if not model.has_class(c)]

            def keep() -> None:
                self._gone(gone)
                self.desk.unlearn(set(labels))
                undone.extend(labels)

            return f"unlearned the last {len(labels)} samples ({', '.join(dict.fromkeys(labels))})", keep

        response.success, response.message = self._edit("~/undo_teaching", "undo", undo)
        response.samples, response.labels = len(undone), list(dict.fromkeys(undone))
        return response

    def _on_rename_class(self, request: RenameClass.Request, response: RenameClass.Response) -> Any:
        old, new = request.label.strip(), request.new_label.strip()

        def rename(model: IncrementalRLSC) -> tuple[str, Callable[[], None]]:
            problem = label_problem(new, self.gate.max_label_length)
            if problem is not None:
                raise ValueError(f"new label refused: {problem}")
            merged = model.has_class(new)
            model.rename_class(old, new)

            def keep() -> None:
                self._gone([old])
                self.gone_classes.pop(new, None)
                self.desk.relabel(old, new)  # its showings' copies still to come: learned as the new name

            note = f"renamed class {old!r} to {new!r}" + (" (merged into the known class)" if merged else "")
            return note, keep

        response.success, response.message = self._edit("~/rename_class", "rename", rename)
        return response

    def reload(self, path: Any, digest: str | None = None, as_is: bool = False) -> Outcome:
        """Hot reload; with ``shadow_window_s`` > 0 the model runs in shadow first (swapped in only if
        better); an immediate swap leaves the replaced model in canary (``canary_window_s``)."""
        if self.shadow.shadow_on:
            return self.shadow.offer(path, digest, as_is)
        replaced = self.serving.model
        outcome = super().reload(path, digest, as_is)
        if outcome.ok:
            self.shadow.swapped_by_force(replaced, path)
        return outcome

    def apply_parameter(self, name: str, value: Any) -> None:
        super().apply_parameter(name, value)
        self.shadow.apply_parameter(name)

    def model_swapped(self, model: IncrementalRLSC) -> None:
        """An empty norm window is filled from the new model's samples, the model keeps the node's
        ``keep_samples`` and ``calibration_evidence`` from now on, and the learning metrics name its
        classes (model lock held); a trial not of this swap ends, the drift alarm takes a new
        reference."""
        self.shadow.swapped()
        self.gate.seed(model)
        self._adopt(model)
        with self.metrics.lock:
            self.metrics.names = [str(c) for c in model.classes_.tolist()]

    def _adopt(self, model: IncrementalRLSC) -> None:
        """The node's ``keep_samples`` and ``calibration_evidence`` for a model it serves, whatever
        its file said (neither changes what the model learned)."""
        model.set_keep_samples(self._model_kwargs["keep_samples"])
        model.set_params(calibration_evidence=self._model_kwargs["calibration_evidence"])

    def end_trials(self, why: str) -> None:
        self.shadow.end(why)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Deactivate, and the showing in view ends: frames after the next activate start another."""
        result = super().on_deactivate(state)
        if result == TransitionCallbackReturn.SUCCESS:
            self.desk.pause()
        return result

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Clean up, and the showings are forgotten with the rest of what the node keeps of its
        inputs: configured again, an answer naming one of them is refused."""
        result = super().on_cleanup(state)
        if result == TransitionCallbackReturn.SUCCESS:
            self.desk.forget()
        return result

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: unconfigured (or finalized), and the showings forgotten as by cleanup."""
        result = super().on_error(state)
        self.desk.forget()
        return result

    def forget_inputs(self) -> None:
        """``~/reset`` and the cleanup transition (model lock held): forget the norm statistics too,
        not only the model."""
        self.gate.reset()

    def forgetting_model(self) -> None:
        """``~/reset`` (model lock held, the old model still serving): copies still to come of what it
        knew are refused."""
        if self.model is not None:
            self._gone(str(c) for c in self.model.classes_.tolist())
        self.desk.unlearn()

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        with self.model_lock:
            median = self.gate.median_norm
            values["feature norm median"] = "none yet" if median is None else f"{median:.3g}"
            values["feature norm limit"] = f"{self.gate.norm_limit:.3g}"
            if self.model is not None:  # None while unconfigured (lifecycle)
                values["classes"] = str(len(self.model.classes_))
                values["samples seen"] = str(self.model.n_samples)
                values["model size [kB]"] = f"{self.model.nbytes / 1e3:.1f}"
                values["confidence calibration"] = _calibration_text(self.model)
        values["unknown threshold"] = f"{self.unknown_threshold:g}"
        values.update(self.bounds.diagnostics())
        values.update(self.shadow.diagnostic_values())
        values.update(self.desk.diagnostic_values())
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        return super().diagnostic_problems() + self.shadow.diagnostic_problems()


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``object_recognition`` executable."""
    return run_node(ObjectRecognitionNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
