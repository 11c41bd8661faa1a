"""ROS 2 node: incremental object recognition (thesis ch. 7, Algorithm 2) on feature vectors.

Subscribes (topic names relative, remappable):
- ``features`` (lifelong_learning/Features, sensor-data QoS): each one is classified and
  answered on ``prediction`` with the same header.
- ``labeled_features`` (lifelong_learning/LabeledFeatures, reliable): training samples; a
  label never seen before adds a class at once, without retraining.

Publishes ``prediction`` (lifelong_learning/Prediction): the predicted label ("" while no
class is known), a softmax confidence, every known label and its raw (recoded) score.

Services (besides ``~/save_model``, ``~/load_model``, ``~/reset`` of the learner base):
``~/predict`` (lifelong_learning/Predict) and ``~/info`` (lifelong_learning/GetClassifierInfo:
classes, counts, chosen λ and α, validation accuracy per λ candidate).

Wrong dimension, NaN/Inf and empty labels are counted and warned about (rate-limited); the
model is untouched and the node keeps running. The model is checkpointed atomically every
``checkpoint_interval_s`` and on shutdown, and restored on start (see ``_base.LearnerNode``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rclpy.qos import QoSProfile, qos_profile_sensor_data

from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.msg import Features, LabeledFeatures, Prediction
from lifelong_learning.nodes._base import LearnerNode, ParamSpec, run_node
from lifelong_learning.srv import GetClassifierInfo, Predict

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "features_topic",
        "features",
        "lifelong_learning/Features to classify (sensor-data QoS).",
        read_only=True,
    ),
    ParamSpec(
        "labeled_features_topic",
        "labeled_features",
        "lifelong_learning/LabeledFeatures to learn from (reliable).",
        read_only=True,
    ),
    ParamSpec("prediction_topic", "prediction", "lifelong_learning/Prediction output.", read_only=True),
    ParamSpec(
        "lambdas",
        [0.1, 1.0, 10.0, 100.0, 1000.0],
        "Regularization λ candidates (one RLS per candidate, best on held-out samples); one value: fixed λ.",
        read_only=True,
    ),
    ParamSpec(
        "alpha",
        "auto",
        "Recoding exponent: a number in [0, 1] (0 plain RLSC, 1 full recoding) or 'auto' (thesis §7.6.3).",
        read_only=True,
    ),
    ParamSpec(
        "alpha_grid",
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
        "α values the 'auto' heuristic chooses from (must contain 0).",
        read_only=True,
    ),
    ParamSpec(
        "validation_every",
        6,
        "With several λ or alpha 'auto': every n-th labeled sample is held out for validation.",
        read_only=True,
    ),
    ParamSpec(
        "min_class_count",
        20,
        "Training samples a class needs to count as well-represented in the α heuristic.",
        read_only=True,
    ),
    ParamSpec("max_validation", 300, "Capacity of the validation buffer (class-balanced).", read_only=True),
    ParamSpec("n_features", 0, "Feature dimension; 0: set by the first labeled sample.", read_only=True),
)


def _softmax_confidence(scores: np.ndarray) -> float:
    e = np.exp(scores - scores.max())
    return float(e.max() / e.sum())


class ObjectRecognitionNode(LearnerNode):
    """Features → Prediction; LabeledFeatures → incremental RLSC update."""

    model_class = IncrementalRLSC

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
        }
        IncrementalRLSC(**self._model_kwargs)  # fail at start on bad parameters
        self.start_learner()
        self.prediction_pub = self.create_publisher(Prediction, p["prediction_topic"], 10)
        self.create_subscription(Features, p["features_topic"], self._on_features, qos_profile_sensor_data)
        self.create_subscription(
            LabeledFeatures, p["labeled_features_topic"], self._on_labeled, QoSProfile(depth=100)
        )
        self.create_service(Predict, "~/predict", self._on_predict, callback_group=self.service_group)
        self.create_service(GetClassifierInfo, "~/info", self._on_info, callback_group=self.service_group)
        with self.model_lock:
            n = len(self.model.classes_)
        self.get_logger().info(f"object recognition ready, {n} classes known")

    # ---------------------------------------------------------------- LearnerNode hooks
    def new_model(self) -> IncrementalRLSC:
        return IncrementalRLSC(**self._model_kwargs)

    def check_model(self, model: IncrementalRLSC) -> None:
        want = self._model_kwargs["n_features"]
        if want is None and self.model is not None:  # a reload: the serving model's dimension
            with self.model_lock:
                want = self.model.n_features_in_
        if want is not None and model.n_features_in_ not in (None, want):
            raise ValueError(f"model has {model.n_features_in_} input features, this node expects {want}")

    # ---------------------------------------------------------------- classification
    def _classify(self, data: Any) -> tuple[str, float, list[str], list[float]]:
        """(label, confidence, labels, scores); raises ValueError on bad input."""
        x = np.asarray(data, dtype=np.float64)
        with self.model_lock:
            model = self.model
            if len(model.classes_) == 0:
                if model.n_features_in_ is not None and x.size != model.n_features_in_:
                    raise ValueError(f"{x.size} features, expected {model.n_features_in_}")
                if not np.all(np.isfinite(x)):
                    raise ValueError("features contain NaN or Inf")
                return "", 0.0, [], []
            scores = model.decision_function(x)[0]
            labels = [str(c) for c in model.classes_.tolist()]
        best = int(np.argmax(scores))
        return labels[best], _softmax_confidence(scores), labels, scores.tolist()

    def _on_features(self, msg: Features) -> None:
        self.stats.arrived("features")
        t = time.perf_counter()
        try:
            label, confidence, labels, scores = self._classify(msg.data)
        except ValueError as exc:
            self.reject("bad features", str(exc))
            return
        self.prediction_pub.publish(
            Prediction(header=msg.header, label=label, confidence=confidence, labels=labels, scores=scores)
        )
        self.stats.timed("predict", time.perf_counter() - t)

    def _on_labeled(self, msg: LabeledFeatures) -> None:
        self.stats.arrived("labeled_features")
        label = msg.label.strip()
        if not label:
            self.reject("empty label", "LabeledFeatures.label is empty")
            return
        t = time.perf_counter()
        with self.model_lock:
            try:
                self.model.partial_fit(np.asarray(msg.data, dtype=np.float64), [label])
            except ValueError as exc:
                self.reject("bad labeled features", str(exc))
                return
            self.updates_since_checkpoint += 1
        self.stats.timed("update", time.perf_counter() - t)

    # ---------------------------------------------------------------- services
    def _on_predict(self, request: Predict.Request, response: Predict.Response) -> Predict.Response:
        try:
            label, confidence, labels, scores = self._classify(request.data)
        except ValueError as exc:
            self.reject("bad predict request", str(exc))
            response.success, response.message = False, str(exc)
            return response
        response.success = True
        response.message = "" if labels else "no class learned yet"
        response.label, response.confidence, response.labels, response.scores = (
            label,
            confidence,
            labels,
            scores,
        )
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

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        with self.model_lock:
            values["classes"] = str(len(self.model.classes_))
            values["samples seen"] = str(self.model.n_samples)
            values["model size [kB]"] = f"{self.model.nbytes / 1e3:.1f}"
        return values


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``object_recognition`` executable."""
    return run_node(ObjectRecognitionNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
