"""``nystrom_tuner`` node: offline retraining from rosbag2 logs on request.

Runs :func:`lifelong_learning.retraining.pipeline.run_job` (the same code as
``lifelong-learning tune``) in a worker thread, one job at a time.

Services:
- ``~/tune`` (lifelong_learning/TuneModel): start a job; answers at once, always: accepted, or
  refused with the reason (counted in diagnostics, ``rejected: <reason>``):

  - ``invalid request``: unknown task or objective, no bag, a bag that is not a directory,
    a missing URDF or model to continue from;
  - ``request over limit``: ``epochs`` above ``max_epochs`` or ``centers`` above ``max_centers``;
  - ``unsafe output path``: ``out_path`` outside ``output_dir`` (unless
    ``allow_paths_outside_output_dir``), or over anything but a model file (a directory, a
    symlink, a FIFO, another file; a path under a regular file); the reports next to it alike;
  - ``busy``: a job is running; ``shutting down``: the node is stopping.

Publishes (topic names relative, remappable):
- ``tuning_progress`` (std_msgs/String, JSON): ``{"state": "running", "objective", "epoch",
  "epochs", "value", "eta_s"}`` after every epoch, then ``{"state": "done", "out_path",
  "report", "skipped"}``, ``{"state": "failed", "error", "out_path"}`` (an unreadable bag: the
  node keeps serving; counted as ``jobs failed``, the error in ``last failure``) or
  ``{"state": "cancelled"}``.
- ``tuned_model`` (std_msgs/String, transient local): the path of each new model file. The
  learner nodes subscribe to it (their ``model_topic``) and hot-reload the files of their kind;
  ``~/load_model`` of a learner node loads one explicitly.

Stopping (SIGINT/SIGTERM, :meth:`NystromTunerNode.destroy_node`): a running job is told to stop;
it ends at its next epoch or replayed block without writing a model file, and the process waits
for it (the worker is not a daemon thread: a daemon thread still inside torch when the interpreter
exits aborted the process with "terminate called without an active exception").
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String

from lifelong_learning.core.files import UnsafePathError, confined_path
from lifelong_learning.nodes._base import DEFAULT_MODEL_DIRECTORY, NodeBase, ParamSpec, run_node
from lifelong_learning.srv import TuneModel

#: seconds destroy_node waits for a stopped job before it logs that the process waits on
STOP_WAIT_S = 10.0

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "output_dir",
        "",
        "Directory of the model files ('' = ~/.ros/lifelong_learning): a request without out_path "
        "writes here, a relative out_path is taken under it, and one that leads outside is refused.",
    ),
    ParamSpec(
        "allow_paths_outside_output_dir",
        False,
        "Accept a request's out_path outside output_dir (any participant on the ROS domain can call "
        "~/tune: off by default). Paths over anything but a model file are refused even so.",
    ),
    ParamSpec(
        "default_objective",
        "proposed",
        "Objective(s) when a request gives none (comma-separated).",
    ),
    ParamSpec("default_centers", 200, "Nyström centres when a request gives 0.", bounds=(1, 1000000)),
    ParamSpec(
        "default_epochs",
        100,
        "Adam steps when a request gives 0 (early stop when the objective rises).",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "max_epochs",
        1000,
        "Largest epochs a request may ask for (refused above): 10x the default; with early stopping "
        "real jobs stop far earlier, and one absurd request must not occupy the tuner for days.",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "max_centers",
        20000,
        "Largest centres a request may ask for (refused above): one 20000x20000 float64 kernel matrix "
        "is 3.2 GB and a job holds several, about what one large GPU or host can spare.",
        bounds=(1, 1000000),
    ),
    ParamSpec("learning_rate", 0.05, "Adam learning rate.", bounds=(1e-06, 10.0)),
    ParamSpec("device", "auto", "'auto' (CUDA if available), 'cpu' or 'cuda'."),
    ParamSpec("dtype", "float64", "'float64' or 'float32'."),
    ParamSpec(
        "test_fraction", 0.2, "Share of the samples held out for the test metrics.", bounds=(0.01, 0.9)
    ),
    ParamSpec("urdf_path", "", "URDF for inverse-dynamics requests without urdf_path."),
    ParamSpec(
        "joint_states_topic",
        "/joint_states",
        "Bag topic of sensor_msgs/JointState for inverse-dynamics requests without topic "
        "('' = every JointState topic: wrong when predicted torques were recorded too).",
    ),
    ParamSpec(
        "labeled_features_topic",
        "",
        "Bag topic of LabeledFeatures for classification requests without topic ('' = every one).",
    ),
    ParamSpec("progress_topic", "tuning_progress", "std_msgs/String (JSON) progress output."),
    ParamSpec("model_topic", "tuned_model", "std_msgs/String: path of each new model file."),
)


class NystromTunerNode(NodeBase):
    """Tunes Nyström models from bags on request, in a worker thread; every request is answered."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("nystrom_tuner", PARAMS, **kwargs)
        p = self.params
        if int(p["max_epochs"]) < 1 or int(p["max_centers"]) < 1:
            raise ValueError("max_epochs and max_centers must be >= 1")
        if not 1 <= int(p["default_epochs"]) <= int(p["max_epochs"]):
            raise ValueError(f"default_epochs must be in [1, max_epochs={p['max_epochs']}]")
        if not 1 <= int(p["default_centers"]) <= int(p["max_centers"]):
            raise ValueError(f"default_centers must be in [1, max_centers={p['max_centers']}]")
        base = str(p["output_dir"])
        self.output_dir = Path(os.path.expanduser(base or DEFAULT_MODEL_DIRECTORY))
        self.progress_pub = self.create_publisher(String, p["progress_topic"], 10)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.model_pub = self.create_publisher(String, p["model_topic"], latched)
        self.create_service(TuneModel, "~/tune", self._on_tune)
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self.jobs_done = 0
        self.jobs_failed = 0
        self.jobs_cancelled = 0
        self.last_failure = "none"
        self.last_job_failed = False  # a WARN in diagnostics until a job succeeds
        self.last_skipped: dict[str, int] = {}

    # ------------------------------------------------------------ service
    def _refuse(self, response: TuneModel.Response, reason: str, message: str) -> TuneModel.Response:
        self.reject(reason, message)
        response.accepted, response.message, response.out_path = False, message, ""
        return response

    def _on_tune(self, request: TuneModel.Request, response: TuneModel.Response) -> TuneModel.Response:
        try:
            return self._answer(request, response)
        except Exception as exc:  # never leave a client without an answer
            self.get_logger().error(f"tune request failed: {type(exc).__name__}: {exc}")
            return self._refuse(response, "internal error", f"request failed: {type(exc).__name__}: {exc}")

    def _limits(self, request: TuneModel.Request) -> str | None:
        """Why the request asks for more than the limits allow, or None."""
        p = self.params
        if int(request.epochs) > int(p["max_epochs"]):
            return f"epochs {request.epochs} is above max_epochs {p['max_epochs']}"
        if int(request.centers) > int(p["max_centers"]):
            return f"centers {request.centers} is above max_centers {p['max_centers']}"
        return None

    def _out_path(self, request: TuneModel.Request) -> Path:
        """The request's out_path confined to output_dir (UnsafePathError), or a new name there."""
        out = request.out_path
        if not out:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
            out = f"{request.task or 'model'}-{stamp}.npz"
        return confined_path(
            out, self.output_dir, allow_outside=bool(self.params["allow_paths_outside_output_dir"])
        )

    def _answer(self, request: TuneModel.Request, response: TuneModel.Response) -> TuneModel.Response:
        from lifelong_learning.retraining.pipeline import TuningJob

        if self._stop.is_set():
            return self._refuse(response, "shutting down", "the tuner is shutting down")
        over = self._limits(request)
        if over is not None:
            return self._refuse(response, "request over limit", over)
        try:
            out = self._out_path(request)
        except UnsafePathError as exc:
            return self._refuse(response, "unsafe output path", str(exc))
        p = self.params
        objectives = [
            o.strip() for o in (request.objective or p["default_objective"]).split(",") if o.strip()
        ]
        job = TuningJob(
            bags=list(request.bags),
            task=request.task,
            out=str(out),
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
        except UnsafePathError as exc:
            return self._refuse(response, "unsafe output path", str(exc))
        except (ValueError, OSError) as exc:
            return self._refuse(response, "invalid request", str(exc))
        with self._lock:
            if self._worker is not None and self._worker.is_alive():
                return self._refuse(response, "busy", "a tuning run is already in progress")
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                return self._refuse(response, "unsafe output path", f"cannot create {out.parent}: {exc}")
            # not a daemon: the interpreter waits for it at exit, after it was told to stop
            self._worker = threading.Thread(target=self._run, args=(job,), name="nystrom_tuner")
            self._worker.start()
        response.accepted, response.out_path = True, str(out)
        response.message = f"tuning {request.task} on {len(job.bags)} bag(s) with {', '.join(objectives)}"
        self.get_logger().info(response.message)
        return response

    # ------------------------------------------------------------ worker
    def _publish(self, payload: dict[str, Any]) -> None:
        try:
            self.progress_pub.publish(String(data=json.dumps(payload)))
        except Exception as exc:  # the context may be going down while a job ends
            self.get_logger().warning(f"progress not published ({exc}): {payload.get('state')}")

    def _run(self, job: Any) -> None:
        from lifelong_learning.retraining.pipeline import JobCancelledError, run_job

        t0 = time.monotonic()
        n_obj = len(job.objectives)

        def progress(objective: str, epoch: int, info: dict[str, Any]) -> None:
            k = list(job.objectives).index(objective)
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
            report = run_job(job, callback=progress, should_stop=self._stop.is_set)
        except JobCancelledError:
            self.jobs_cancelled += 1
            self.get_logger().info(f"tuning stopped after {time.monotonic() - t0:.1f} s; no model written")
            self._publish({"state": "cancelled", "out_path": str(job.out)})
            return
        except Exception as exc:  # any failure is reported on the topic, the node keeps serving
            self.jobs_failed += 1
            self.last_job_failed = True
            self.last_failure = f"{type(exc).__name__}: {exc}"
            self.get_logger().error(f"tuning failed: {exc}")
            self._publish({"state": "failed", "error": self.last_failure, "out_path": str(job.out)})
            return
        self.jobs_done += 1
        self.last_job_failed = False
        self.last_skipped = dict(report.get("skipped", {}))
        self.get_logger().info(f"model written to {job.out} in {time.monotonic() - t0:.1f} s")
        self._publish(
            {
                "state": "done",
                "out_path": str(job.out),
                "report": report["objectives"],
                "skipped": self.last_skipped,
            }
        )
        self.model_pub.publish(String(data=str(job.out)))

    @property
    def running(self) -> bool:
        """A job is running now."""
        return self._worker is not None and self._worker.is_alive()

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        values["running"] = str(self.running)
        values["jobs done"] = str(self.jobs_done)
        values["jobs failed"] = str(self.jobs_failed)
        values["jobs cancelled"] = str(self.jobs_cancelled)
        values["last failure"] = self.last_failure
        values["samples skipped (last job)"] = (
            ", ".join(f"{k}: {v}" for k, v in sorted(self.last_skipped.items())) or "none"
        )
        values["limits"] = f"epochs <= {self.params['max_epochs']}, centers <= {self.params['max_centers']}"
        values["output dir"] = str(self.output_dir)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        problems = super().diagnostic_problems()
        if self.last_job_failed:
            problems.append((DiagnosticStatus.WARN, f"the last tuning job failed: {self.last_failure}"))
        return problems

    def stop_job(self, timeout_s: float = STOP_WAIT_S) -> bool:
        """Tell a running job to stop and wait up to ``timeout_s`` for it; True when none runs now.

        New requests are refused from here on.
        """
        self._stop.set()
        worker = self._worker
        if worker is None or worker is threading.current_thread():
            return True
        worker.join(timeout_s)
        if worker.is_alive():
            self.get_logger().warning(
                f"the tuning job has not stopped after {timeout_s:g} s (one epoch can be long); "
                "the process exits once it does"
            )
            return False
        return True

    def destroy_node(self) -> None:
        self.stop_job()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the node (the ``nystrom_tuner`` executable)."""
    return run_node(NystromTunerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
