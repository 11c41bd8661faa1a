"""``nystrom_tuner`` node: offline retraining from rosbag2 logs on request.

Runs :func:`lifelong_learning.retraining.pipeline.run_job` (the same code as
``lifelong-learning tune``) in a background thread, one job at a time.

Services:
- ``~/tune`` (lifelong_learning/TuneModel): start a job; answers at once.

Publishes (topic names relative, remappable):
- ``tuning_progress`` (std_msgs/String, JSON): ``{"state": "running", "objective", "epoch",
  "epochs", "value", "eta_s"}`` after every epoch, then ``{"state": "done", "out_path",
  "report"}`` or ``{"state": "failed", "error"}``.
- ``tuned_model`` (std_msgs/String, transient local): the path of each new model file. The
  learner nodes subscribe to it (their ``model_topic``) and hot-reload the files of their kind;
  ``~/load_model`` of a learner node loads one explicitly.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String

from lifelong_learning.nodes._base import NodeBase, ParamSpec, run_node
from lifelong_learning.srv import TuneModel

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "output_dir",
        "",
        "Directory of model files for requests without out_path ('' = ~/.ros/lifelong_learning).",
        read_only=True,
    ),
    ParamSpec(
        "default_objective",
        "proposed",
        "Objective(s) when a request gives none (comma-separated).",
        read_only=True,
    ),
    ParamSpec("default_centers", 200, "Nyström centres when a request gives 0.", read_only=True),
    ParamSpec(
        "default_epochs",
        100,
        "Adam steps when a request gives 0 (early stop when the objective rises).",
        read_only=True,
    ),
    ParamSpec("learning_rate", 0.05, "Adam learning rate.", read_only=True),
    ParamSpec("device", "auto", "'auto' (CUDA if available), 'cpu' or 'cuda'.", read_only=True),
    ParamSpec("dtype", "float64", "'float64' or 'float32'.", read_only=True),
    ParamSpec("test_fraction", 0.2, "Share of the samples held out for the test metrics.", read_only=True),
    ParamSpec("urdf_path", "", "URDF for inverse-dynamics requests without urdf_path.", read_only=True),
    ParamSpec(
        "joint_states_topic",
        "/joint_states",
        "Bag topic of sensor_msgs/JointState for inverse-dynamics requests without topic "
        "('' = every JointState topic: wrong when predicted torques were recorded too).",
        read_only=True,
    ),
    ParamSpec(
        "labeled_features_topic",
        "",
        "Bag topic of LabeledFeatures for classification requests without topic ('' = every one).",
        read_only=True,
    ),
    ParamSpec("progress_topic", "tuning_progress", "std_msgs/String (JSON) progress output.", read_only=True),
    ParamSpec("model_topic", "tuned_model", "std_msgs/String: path of each new model file.", read_only=True),
)


class NystromTunerNode(NodeBase):
    """Tunes Nyström models from bags on request, in a background thread."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("nystrom_tuner", PARAMS, **kwargs)
        p = self.params
        self.progress_pub = self.create_publisher(String, p["progress_topic"], 10)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.model_pub = self.create_publisher(String, p["model_topic"], latched)
        self.create_service(TuneModel, "~/tune", self._on_tune)
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.jobs_done = 0
        self.jobs_failed = 0

    # ------------------------------------------------------------ service
    def _on_tune(self, request: TuneModel.Request, response: TuneModel.Response) -> TuneModel.Response:
        from lifelong_learning.retraining.pipeline import TuningJob

        p = self.params
        objectives = [
            o.strip() for o in (request.objective or p["default_objective"]).split(",") if o.strip()
        ]
        out = request.out_path
        if not out:
            base = Path(p["output_dir"]) if p["output_dir"] else Path.home() / ".ros" / "lifelong_learning"
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            out = str(base / f"{request.task}-{stamp}.npz")
        job = TuningJob(
            bags=list(request.bags),
            task=request.task,
            out=out,
            objectives=objectives,
            centers=int(request.centers) or int(p["default_centers"]),
            epochs=int(request.epochs) or int(p["default_epochs"]),
            lr=float(p["learning_rate"]),
            device=p["device"],
            dtype=p["dtype"],
            test_fraction=float(p["test_fraction"]),
            urdf=request.urdf_path or p["urdf_path"] or None,
            init=request.init_model or None,
            topic=request.topic
            or (
                p["joint_states_topic"] if request.task == "inverse-dynamics" else p["labeled_features_topic"]
            )
            or None,
        )
        try:
            job.validate()
        except ValueError as exc:
            self.reject("invalid request", str(exc))
            response.accepted, response.message = False, str(exc)
            return response
        with self._lock:
            if self._worker is not None and self._worker.is_alive():
                response.accepted, response.message = False, "a tuning run is already in progress"
                return response
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            self._worker = threading.Thread(target=self._run, args=(job,), name="nystrom_tuner", daemon=True)
            self._worker.start()
        response.accepted, response.out_path = True, out
        response.message = f"tuning {request.task} on {len(job.bags)} bag(s) with {', '.join(objectives)}"
        self.get_logger().info(response.message)
        return response

    # ------------------------------------------------------------ worker
    def _publish(self, payload: dict[str, Any]) -> None:
        self.progress_pub.publish(String(data=json.dumps(payload)))

    def _run(self, job: Any) -> None:
        from lifelong_learning.retraining.pipeline import run_job

        t0 = time.monotonic()
        n_obj = len(job.objectives)
        done_before: dict[str, int] = {}

        def progress(objective: str, epoch: int, info: dict[str, Any]) -> None:
            k = list(job.objectives).index(objective)
            done_before.setdefault(objective, k)
            steps = k * job.epochs + epoch
            elapsed = time.monotonic() - t0
            eta = elapsed / steps * (n_obj * job.epochs - steps) if steps else None
            self._publish(
                {
                    "state": "running",
                    "objective": objective,
                    "epoch": epoch,
                    "epochs": job.epochs,
                    "value": info["objective"],
                    "eta_s": eta,
                }
            )

        try:
            report = run_job(job, callback=progress)
        except Exception as exc:  # any failure is reported on the topic, the node keeps serving
            self.jobs_failed += 1
            self.get_logger().error(f"tuning failed: {exc}")
            self._publish({"state": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return
        self.jobs_done += 1
        self.get_logger().info(f"model written to {job.out} in {time.monotonic() - t0:.1f} s")
        self._publish({"state": "done", "out_path": str(job.out), "report": report["objectives"]})
        self.model_pub.publish(String(data=str(job.out)))

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        values["running"] = str(self._worker is not None and self._worker.is_alive())
        values["jobs done"] = str(self.jobs_done)
        values["jobs failed"] = str(self.jobs_failed)
        return values


def main(args: list[str] | None = None) -> int:
    """Run the node (the ``nystrom_tuner`` executable)."""
    return run_node(NystromTunerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
