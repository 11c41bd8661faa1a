"""LearnerNode: a node that holds a learned model (imports rclpy: only for modules that run nodes).

A thin adapter: the parameters, services (``~/save_model``, ``~/load_model``, ``~/reset``,
``~/rollback``), model topics, checkpoint timer and lifecycle of a learner node, wired to the
ROS-free :class:`~lifelong_learning.serving.ServingCore`, which holds the model and does
everything to it. What a learner node does with its models, and why: ``docs/serving.md``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.service import Service
from rclpy.subscription import Subscription
from std_msgs.msg import String
from std_srvs.srv import Trigger

from lifelong_learning.core.model_file import MAX_MODEL_BYTES, ModelFileError
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.core.realtime import normal_policy_here
from lifelong_learning.msg import LearningMetrics
from lifelong_learning.nodes.base import NodeBase, ParamSpec, directory_or_default
from lifelong_learning.nodes.learning_metrics import (
    METRICS_PARAMS,
    BatchObjectiveCache,
    LearningMetricsPublisher,
    add_batch_objective,
)
from lifelong_learning.nodes.lifecycle import LifecycleStateMixin
from lifelong_learning.nodes.model_data import ModelDataReceiver, ModelFileHeader
from lifelong_learning.serving import DEFAULT_MAX_RECEIVED_MODEL_BYTES, Outcome, RefusedError, ServingCore
from lifelong_learning.serving.history import ModelHistory
from lifelong_learning.srv import LoadModel, SaveModel, ServingState

#: the ``checkpoint_path`` that names the node's own file under ``model_directory``
AUTO_CHECKPOINT = "auto"

LEARNER_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "checkpoint_path",
        AUTO_CHECKPOINT,
        "Model file written every checkpoint_interval_s and on cleanup and shutdown, and restored on "
        "configure; 'auto' = <model_directory>/checkpoints/<namespace>/<node>.llm (one per node, "
        "under the ROS home by default); '' disables checkpoints. '~' expands to the home directory.",
    ),
    ParamSpec(
        "checkpoint_interval_s",
        30.0,
        "Seconds between checkpoints (0: only on shutdown and cleanup; settable at run time).",
        bounds=(0.0, 86400.0),
        at_run_time=True,
        minimum_nonzero=0.1,
    ),
    ParamSpec(
        "restore_on_start",
        True,
        "Load checkpoint_path when the node is configured (at start with autostart) if it exists; "
        "the checkpoint's hyperparameters win over conflicting parameters (logged as a conflict).",
    ),
    ParamSpec(
        "autostart",
        True,
        "Configure and activate at start (true: works without a lifecycle manager); false: stay "
        "unconfigured until a lifecycle manager (nav2_lifecycle_manager, ros2 lifecycle set) "
        "configures and activates the node.",
    ),
    ParamSpec(
        "model_topic",
        "tuned_model",
        "std_msgs/String (reliable, transient local): paths of model files to hot-reload, e.g. "
        "from nystrom_tuner; files of another kind are ignored; '' disables.",
    ),
    ParamSpec(
        "model_directory",
        "",
        "The directory that ~/save_model, ~/load_model and the paths announced on model_topic "
        "are confined to: relative paths are taken under it, and a path that resolves outside "
        "it (symlinks and '..' followed) is refused and counted ('path refused'). '~' expands; "
        "'' = $ROS_HOME/lifelong_learning (~/.ros/lifelong_learning when ROS_HOME is unset; the "
        "nystrom_tuner's default output_dir). Stale temporary "
        "files of killed writes in it are removed at start.",
    ),
    ParamSpec(
        "allow_paths_outside_model_directory",
        False,
        "Let ~/save_model, ~/load_model and model_topic use paths outside model_directory. "
        "Saves still never replace a symlink, a directory, a special file or a non-model file.",
    ),
    ParamSpec(
        "keep_previous_models",
        3,
        "Models kept on disk in <model_directory>/previous/<node>/ when the serving model is "
        "replaced (hot reload, received model, ~/reset), for ~/rollback; the oldest beyond this "
        "count are removed, except the model that learned the most here (pinned). A model is kept "
        "once; an untrained one only when a trained one replaces it. 0 keeps none (and ~/rollback "
        "has nothing to roll back to).",
        bounds=(0, 100),
    ),
    ParamSpec(
        "model_data_topic",
        "tuned_model_data",
        "lifelong_learning/ModelFile (reliable, transient local, depth 2): model files as bytes, "
        "from a tuner without a shared filesystem, taken off the executor on a participant of "
        "their own; the size (max_model_bytes) is checked before anything keeps the bytes, then "
        "the SHA-256 and the model's fit, then it is stored in <model_directory>/received/<node>/ "
        "and hot-reloaded; files of another kind are ignored; '' disables.",
    ),
    ParamSpec(
        "max_model_bytes",
        DEFAULT_MAX_RECEIVED_MODEL_BYTES,
        "The largest model file taken from model_data_topic, in bytes (512 MiB); larger ones are "
        "refused and counted ('model too large') from the message's header, their bytes freed "
        "before anything is copied, kept or written.",
        bounds=(1, MAX_MODEL_BYTES),
    ),
    *METRICS_PARAMS,
)


#: why a model received or promoted between cleanup and the next configure is refused
#: the refusal of a model received as bytes while the node is not configured (or ending)
MODEL_WHILE_CLOSED = "model refused: node not configured"
UNCONFIGURED = "the node is not configured: no model replaces the serving one until it is configured again"
#: why a model received or promoted while the node's process ends is refused
ENDING = "the node is ending: its final checkpoint is being written"
#: the rejection counted for a request to a finalized node, and its answer
FINALIZED = "node finalized"
FINALIZED_MESSAGE = (
    "the node is finalized (lifecycle shutdown): it serves nothing and changes nothing; restart its process"
)


class _NodeReport:
    """The serving core's reports as the node's log lines and counted rejections."""

    def __init__(self, node: NodeBase) -> None:
        self._node = node

    def info(self, message: str) -> None:
        self._node.get_logger().info(message)

    def warning(self, message: str) -> None:
        self._node.get_logger().warning(message)

    def error(self, message: str) -> None:
        self._node.get_logger().error(message)

    def reject(self, reason: str, detail: str, warn: bool = True) -> None:
        self._node.reject(reason, detail, warn)


class LearnerNode(LifecycleStateMixin, NodeBase):
    """A managed node holding a learned model, with save/load/reset/rollback services and checkpoints.

    Its model, and every replacement of it (hot reload of the files announced on ``model_topic``
    or received as bytes on ``model_data_topic``, ``~/load_model``, ``~/reset``, ``~/rollback``),
    is the :class:`~lifelong_learning.serving.ServingCore`'s (:attr:`serving`); the paths that
    requests name are confined to ``model_directory``. Why, and the rules: ``docs/serving.md``.

    Subclasses set :attr:`model_class` (a :class:`~lifelong_learning.core.persistence.PersistentModel`:
    its ``kind`` is what the node loads, its model files are the node's checkpoints), implement
    :meth:`new_model` and, when a loaded model can be of the right kind but unfit for this node
    (another dimension, other joints), :meth:`check_model`; they may extend :meth:`model_swapped`,
    :meth:`forget_inputs` and :meth:`forgetting_model`. They hold ``with self.model_lock:``
    around every use of ``self.model``, for the whole predict/update of one message, so that no
    message sees a half-swapped model, count what they learn with ``self.serving.count_updates(n)``
    (once per callback), and call :meth:`start_learner` at the end of their ``__init__``.
    """

    #: the learner this node serves
    model_class: ClassVar[type[PersistentModel]]
    #: the tuner's task that retrains it (``~/serving_state``; retraining.job.TASKS)
    retraining_task: ClassVar[str] = ""
    #: the node's shadow evaluation, canary and drift alarm (set by a subclass that has them)
    shadow: Any = None
    #: whether ~/learning_metrics may solve the model's weights for its batch objective under the model
    #: lock (a node that answers at control rates says no: it reports once learning has solved them)
    batch_objective_solves: ClassVar[bool] = True

    LEARNER_PARAMS: tuple[ParamSpec, ...] = LEARNER_PARAMS

    def __init__(self, node_name: str, params: Sequence[ParamSpec] = (), **kwargs: Any):
        NodeBase.__init__(self, node_name, (*self.LEARNER_PARAMS, *params), **kwargs)
        p = self.params
        checkpoint = str(p["checkpoint_path"])
        models = directory_or_default(str(p["model_directory"]))
        # the node's own folders under model_directory, by fully qualified name (robots do not collide)
        own = Path(*self.get_fully_qualified_name().strip("/").split("/"))
        if checkpoint == AUTO_CHECKPOINT:
            checkpoint = str(models / "checkpoints" / own.parent / f"{own.name}.llm")
        self.serving = ServingCore(
            self.model_class,
            model_directory=models,
            own=own,
            keep_previous=int(p["keep_previous_models"]),
            checkpoint_path=Path(os.path.expanduser(checkpoint)) if checkpoint else None,
            checkpoint_name=checkpoint,
            max_received_bytes=int(p["max_model_bytes"]),
            allow_outside=bool(p["allow_paths_outside_model_directory"]),
            check=self.check_model,
            on_swap=self.model_swapped,
            catch_up=self.catch_up_model,
            report=_NodeReport(self),
        )
        self.serving.close(UNCONFIGURED)  # until configure opens it
        #: held around every use of :attr:`model` (re-entrant; the serving core's lock)
        self.model_lock = self.serving.lock
        self.service_group = MutuallyExclusiveCallbackGroup()
        self.reload_group = MutuallyExclusiveCallbackGroup()
        self.active = False
        self.finalized = False  # the shutdown transition was made: nothing is served any more
        self.ignored_inactive = 0  # input messages that arrived while the node was not active
        self._configured: list[Any] = []  # services, timers and subscriptions made by configure
        self._checkpoint_timer: Any = None
        self._checkpoint_writer: threading.Thread | None = None
        self._model_receiver: ModelDataReceiver | None = None  # model_data_topic, while configured
        self._configure_error: Exception | None = None
        #: ~/learning_metrics: the subclass sets ``metrics.accumulator`` and reports it in learning_metrics
        self.metrics = LearningMetricsPublisher(
            self, self._metrics_message, float(p["metrics_period_s"]), self.service_group
        )
        self._batch_objective = BatchObjectiveCache(self.batch_objective_solves)
        LifecycleStateMixin.__init__(self, callback_group=self.service_group)

    # ---------------------------------------------------------------- the serving core's state
    # (read-only views for tests and docs; the node itself reads self.serving)
    @property
    def model(self) -> Any:
        """The serving model (None while unconfigured); use it under :attr:`model_lock`, taken into a
        local once per callback. Only the serving core changes it (:meth:`build_model`, reloads)."""
        return self.serving.model

    @property
    def model_version(self) -> int:
        """Bumped on every swap (reload, reset, rollback)."""
        return self.serving.version

    @property
    def history(self) -> ModelHistory:
        """The replaced models kept for ``~/rollback``."""
        return self.serving.history

    @property
    def checkpoint_path(self) -> Path | None:
        """The checkpoint file (None: checkpoints disabled)."""
        return self.serving.checkpoints.path

    @property
    def checkpoint_error(self) -> str | None:
        """The failure of the last checkpoint attempt; None when it succeeded."""
        return self.serving.checkpoints.error

    @property
    def last_checkpoint(self) -> str:
        """When the last checkpoint was written (or where the model was restored from)."""
        return self.serving.checkpoints.last

    @property
    def ignored_model_files(self) -> int:
        """Announced or received model files of another kind (for another node)."""
        return self.serving.ignored_model_files

    # ---------------------------------------------------------------- subclass hooks
    def new_model(self) -> PersistentModel:
        """A fresh, untrained model from the node's parameters."""
        raise NotImplementedError

    def reset_model(self) -> PersistentModel:
        """The model ``~/reset`` serves (called with the old one still serving): by default
        :meth:`new_model`."""
        return self.new_model()

    def check_model(self, model: PersistentModel) -> None:
        """Raise ValueError if ``model`` (of the right kind, read from a file) does not fit this node."""

    def catch_up_model(self, model: PersistentModel, serving: PersistentModel) -> PersistentModel:
        """The model read from a file that replaces ``serving`` (a reload, a promotion), brought up
        to what ``serving`` changed since it was made; ValueError: it may not replace it. Called under
        the model lock; the model itself by default."""
        return model

    def parameter_conflicts(self, model: PersistentModel) -> list[str]:
        """How a restored ``model``'s hyperparameters differ from this node's parameters, one text per
        difference (``"mode: checkpoint 'parametric', parameter 'semiparametric'"``); none by default."""
        return []

    def configure_learner(self) -> None:
        """Subclass hook of the configure transition, after the model services exist: build or
        restore the model (default :meth:`build_model`) and create the node's own services with
        :meth:`create_configured_service`. Raise ValueError/OSError to fail the transition."""
        self.build_model()

    def model_swapped(self, model: Any) -> None:
        """Subclass hook, called with the model lock held after every swap of the serving model
        (reload, reset, rollback): adapt what the node keeps about the model."""

    def forget_inputs(self) -> None:
        """Subclass hook, called by ``~/reset`` with the model lock held: forget what the node keeps
        about its input streams besides the model (filters, stamps, statistics)."""

    def forgetting_model(self) -> None:
        """Subclass hook, called by ``~/reset`` only, with the model lock held and the old model still
        serving, after :meth:`forget_inputs`: forget what the node keeps about that model's learning."""

    def _before_reset(self) -> None:
        self.forget_inputs()
        self.forgetting_model()

    # ---------------------------------------------------------------- lifecycle
    def start_learner(self) -> None:
        """Call at the end of the subclass ``__init__``: with ``autostart`` (the default), configure
        and activate now, as a lifecycle manager would; otherwise wait, unconfigured, for one.

        Raises:
            ValueError / OSError: the configuration failed (e.g. ``checkpoint_path`` is a directory
                or a symlink): the node does not start, exit status 2.
        """
        if not self.params["autostart"]:
            self.get_logger().info("autostart is false: unconfigured, waiting for a lifecycle manager")
            return
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            error = self._configure_error
            raise error if isinstance(error, ValueError | OSError) else ValueError("configure failed")
        self.trigger_activate()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Configure: files checked, model services, checkpoint timer, model topic, then the model."""
        self._configure_error = None
        self.serving.open()
        try:
            self.serving.prepare_files()
            self.create_configured_service(SaveModel, "~/save_model", self._on_save)
            self.create_configured_service(LoadModel, "~/load_model", self._on_load)
            self.create_configured_service(Trigger, "~/reset", self._on_reset)
            self.create_configured_service(Trigger, "~/rollback", self._on_rollback)
            self.create_configured_service(ServingState, "~/serving_state", self._on_serving_state)
            self._schedule_checkpoints(float(self.params["checkpoint_interval_s"]))
            # transient local: a model announced before this node started is still delivered (the
            # paths: the last 5; the bytes: the last 2, what the tuner keeps, one per kind in turn)
            self._subscribe_to_models(String, "model_topic", self._on_model_announced, depth=5)
            self.configure_learner()
            self._receive_models()  # a model received now replaces the one configure served
        except (ValueError, OSError) as exc:
            self._configure_error = exc
            self.get_logger().error(f"configure failed: {exc}")
            self.serving.close(UNCONFIGURED)
            self._destroy_configured()
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info("configured")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Activate: serve and learn from the input topics."""
        self.active = True
        self.get_logger().info("active: serving and learning")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Deactivate: input messages are ignored (counted), the model is kept, services answer."""
        self.active = False
        self.get_logger().info("inactive: input topics ignored, model kept")
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Clean up: final checkpoint, then the model and what configure created are dropped; the
        model is kept for ``~/rollback`` too (the checkpoint restores it at the next configure).

        Reversible: what the node runs for its whole life (a learning thread) keeps running, so
        that configure and activate make it serve and learn again, as often as a manager asks."""
        self.serving.close(UNCONFIGURED)  # first: a model received or promoted meanwhile is refused
        self.end_trials("the node was cleaned up")
        self._stop_receiving_models()  # before the final checkpoint: it holds any model taken before
        self.final_checkpoint()
        self._destroy_configured()
        with self.serving.replacing(), self.model_lock:  # the core's order: replacements, then the model
            note = self.serving.release()
            self.forget_inputs()
        where = "the checkpoint keeps it" if self.serving.checkpoints.path is not None else "no checkpoint"
        self.get_logger().info(f"cleaned up: model released ({where}){note}")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Shut down (from any state): the final checkpoint, if there is a model; then the node is
        finalized for good: its services answer ``success: false`` (counted ``node finalized``), the
        model topics (paths and bytes) and the checkpoint timer are gone, and nothing changes the
        model any more."""
        self.active = False
        self.finalized = True  # first: a request that comes while the checkpoint is written is refused
        self.serving.close(FINALIZED_MESSAGE)  # and a model received or promoted meanwhile
        self.end_trials("the node was shut down")
        self.shutdown()  # the model receiver stopped, then the final checkpoint
        self._finalize()
        self.get_logger().info("finalized: services refuse every request, nothing changes the model")
        return TransitionCallbackReturn.SUCCESS

    def _finalize(self) -> None:
        """The checkpoint timer and the model subscriptions go: nothing runs for the model any more."""
        self._schedule_checkpoints(0.0)
        for entity in [e for e in self._configured if isinstance(e, Subscription)]:
            self.destroy_subscription(entity)
            self._configured.remove(entity)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: back to unconfigured, model kept on disk by the last checkpoint; a
        node that was being shut down stays finalized (FAILURE: the lifecycle's finalized state)."""
        self.active = False
        if self.finalized:
            self.serving.close(FINALIZED_MESSAGE)
            self._finalize()
            self.get_logger().error("the shutdown transition failed; the node is finalized")
            return TransitionCallbackReturn.FAILURE
        self.serving.close(UNCONFIGURED)
        self.end_trials("a lifecycle transition failed")
        self.get_logger().error("a lifecycle transition failed; the node is unconfigured")
        self._destroy_configured()
        return TransitionCallbackReturn.SUCCESS

    def accepting(self) -> bool:
        """Only while active; messages that arrive otherwise are counted (``ignored while inactive``)."""
        if not self.active:
            self.ignored_inactive += 1
        return self.active

    def create_configured_service(self, srv_type: Any, name: str, callback: Callable[..., Any]) -> Any:
        """A service that exists while the node is configured (destroyed by cleanup); once the node
        is finalized it answers ``success: false`` (every service's response has ``success`` and
        ``message``) and counts the request as ``node finalized``, without calling ``callback``."""

        def answer(request: Any, response: Any) -> Any:
            if not self.finalized:
                return callback(request, response)
            self.reject(FINALIZED, f"{name} refused: {FINALIZED_MESSAGE}")
            response.success, response.message = False, FINALIZED_MESSAGE
            return response

        service = self.create_service(srv_type, name, answer, callback_group=self.service_group)
        self._configured.append(service)
        return service

    def _subscribe_to_models(
        self, msg_type: Any, param: str, callback: Callable[[Any], None], depth: int
    ) -> None:
        """A reliable, transient-local subscription on the topic parameter ``param`` names ('' = none)."""
        topic = str(self.params[param])
        if not topic:
            return
        qos = QoSProfile(
            depth=depth, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self._configured.append(
            self.create_subscription(msg_type, topic, callback, qos, callback_group=self.reload_group)
        )

    def _destroy_configured(self) -> None:
        self._schedule_checkpoints(0.0)
        self._stop_receiving_models()
        for entity in self._configured:
            if isinstance(entity, Service):
                self.destroy_service(entity)
            elif isinstance(entity, Subscription):
                self.destroy_subscription(entity)
        self._configured.clear()

    def apply_parameter(self, name: str, value: Any) -> None:
        super().apply_parameter(name, value)
        if name == "checkpoint_interval_s" and self._checkpoint_timer is not None:
            self._schedule_checkpoints(float(value))
        elif name == "metrics_period_s":
            self.metrics.set_period(float(value))

    # ---------------------------------------------------------------- ~/learning_metrics
    def learning_metrics(self) -> LearningMetrics | None:
        """Subclass hook: the errors of ``metrics.accumulator`` (not None) as a message, or None;
        called with ``metrics.lock`` held (it must not take the model lock); the header, model
        version and samples learned are filled by the caller."""
        return None

    def _metrics_message(self) -> LearningMetrics | None:
        if not self.active:
            return None
        with self.metrics.lock:  # never waits for the model lock while holding it
            msg = self.learning_metrics() if self.metrics.accumulator is not None else None
        if msg is not None:
            with self.model_lock:
                msg.model_version = int(self.serving.version)
                model = self.serving.model
                msg.samples_learned = int(getattr(model, "n_samples", 0) or 0)
                batch = self._batch_objective.of(model) if self.metrics.listened else None
            add_batch_objective(msg, batch)
        return msg

    # ---------------------------------------------------------------- the model
    def build_model(self) -> None:
        """Restore the checkpoint (``restore_on_start``) or create a new model, and serve it.

        A checkpoint that cannot be read or does not fit this node is moved aside and a fresh model
        serves; one whose hyperparameters differ from the parameters is restored (the checkpoint
        wins) and the conflicts are logged and shown in diagnostics (``docs/serving.md``).
        """
        model = self.restore_checkpoint()
        self.serving.serve_first(model if model is not None else self.new_model())

    def restore_checkpoint(self) -> PersistentModel | None:
        """The checkpoint's model, or None (none, not wanted, or moved aside: see :meth:`build_model`)."""
        return self.serving.restore(self.parameter_conflicts, wanted=bool(self.params["restore_on_start"]))

    def reload(self, path: str | os.PathLike[str], digest: str | None = None, as_is: bool = False) -> Outcome:
        """Hot reload of the model in ``path`` (:meth:`ServingCore.reload`): ``(success, message)``;
        on failure the old model keeps serving (counted ``"model reload failed"``). ``as_is``
        (``~/load_model``'s ``as_is: true``): served as the file holds it, like ``~/rollback``, not
        caught up with what the serving model changed since it was made (:meth:`catch_up_model`)."""
        return self.serving.reload(path, digest, catch_up=not as_is)

    def rollback(self) -> Outcome:
        """Serve the most recent previous model again (:meth:`ServingCore.rollback`)."""
        return self.serving.rollback()

    def checkpoint(self) -> bool:
        """Write the checkpoint if anything changed since the last one (or the last attempt failed);
        True when written. A failure is retried by the next one and shown at ERROR in diagnostics."""
        return self.serving.checkpoint()

    def end_trials(self, why: str) -> None:
        """Subclass hook: end what compares models while they serve (a model in shadow or canary, the
        drift alarm's reference), because of ``why`` (cleanup, shutdown): no verdict of a trial
        started before replaces the model served after."""

    def settle(self) -> None:
        """Subclass hook: finish what was queued for the serving model (what the node answered and
        learns later), so that a final checkpoint holds it; the node goes on learning after it."""

    def final_checkpoint(self) -> None:
        """:meth:`settle`, then write the checkpoint (cleanup, shutdown, process exit)."""
        self.settle()
        if self.checkpoint():
            self.get_logger().info(f"final checkpoint written to {self.serving.checkpoints.path}")

    def shutdown(self) -> None:
        """Final checkpoint; called by :func:`~lifelong_learning.nodes.runner.run_node` on exit and by
        the shutdown transition (subclasses end what runs for the node's whole life here). First no
        model may replace the serving one and the model receiver stops: the checkpoint holds the
        model that serves to the end."""
        self.end_serving()
        self.final_checkpoint()

    def end_serving(self) -> None:
        """No model replaces the serving one any more (unless already closed) and the model receiver
        stops: what the node does at its end, before its final checkpoint."""
        if not self.serving.closed:
            self.serving.close(ENDING)
        self._stop_receiving_models()

    def _schedule_checkpoints(self, interval: float) -> None:
        if self._checkpoint_timer is not None:
            self.destroy_timer(self._checkpoint_timer)
            self._checkpoint_timer = None
        if self.serving.checkpoints.path is not None and interval > 0:
            self._checkpoint_timer = self.create_timer(
                interval, self._checkpoint_off_the_callback_path, callback_group=self.service_group
            )

    def _checkpoint_off_the_callback_path(self) -> None:
        """The checkpoint timer: the snapshot (under the model lock) and the write run on a thread of
        their own, so that the executor goes on answering inputs meanwhile (a single-threaded
        executor would otherwise wait for the disk); a tick while the last write runs is skipped."""
        writer = self._checkpoint_writer
        if writer is not None and writer.is_alive():
            return
        self._checkpoint_writer = threading.Thread(
            target=self._background_checkpoint, name="checkpoint", daemon=True
        )
        self._checkpoint_writer.start()

    def _background_checkpoint(self) -> None:
        normal_policy_here()  # started by the executor's thread, which may run at a real-time priority
        self.checkpoint()

    # ---------------------------------------------------------------- services and model topics
    def _on_save(self, request: SaveModel.Request, response: SaveModel.Response) -> SaveModel.Response:
        try:
            path = self.serving.request_path(request.path, for_writing=True)
            self.serving.write(path)
            response.success, response.message = True, f"saved to {path}"
        except RefusedError as exc:
            response.success, response.message = False, str(exc)
        except (OSError, ModelFileError, ValueError) as exc:
            response.success, response.message = False, f"save failed: {exc}"
        return response

    def _on_load(self, request: LoadModel.Request, response: LoadModel.Response) -> LoadModel.Response:
        try:
            path = self.serving.request_path(request.path, for_writing=False)
        except RefusedError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success, response.message = self.reload(path, as_is=bool(request.as_is))
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """A new model from the parameters; the old one is kept for ``~/rollback`` first."""
        response.success, response.message = self.serving.reset(self.reset_model, self._before_reset)
        return response

    def _on_rollback(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.rollback()
        if not response.success:
            self.get_logger().warning(f"~/rollback: {response.message}")
        return response

    def _on_serving_state(self, request: Any, response: Any) -> Any:
        """``~/serving_state``: the task, the serving model's version, its trial and drift alarm."""
        response.task = self.retraining_task
        with self.model_lock:
            response.model_version = int(self.serving.version)
        response.model = self.serving.last_reload
        if self.shadow is not None:
            self.shadow.fill_state(response)
        response.success, response.message = True, self.lifecycle_state
        return response

    def _on_model_announced(self, msg: String) -> None:
        self.serving.announced(msg.data, str(self.params["model_topic"]), self.reload)

    def _receive_models(self) -> None:
        """Model files as bytes on ``model_data_topic`` ('' = none): a :class:`ModelDataReceiver` (a
        participant and a thread of its own: the executor never takes these messages) that sizes each
        from its header before anything keeps its bytes (transient local, depth 2: what the tuner
        keeps, one per kind in turn)."""
        topic = str(self.params["model_data_topic"])
        if not topic or self._model_receiver is not None:
            return
        self._model_receiver = ModelDataReceiver(
            self.resolve_topic_name(topic),
            f"_{self.get_name()}_model_data",  # hidden (a leading underscore), in this node's namespace
            self.get_namespace(),
            self.context.get_domain_id(),
            depth=2,
            max_bytes=int(self.params["max_model_bytes"]),
            on_message=self._on_model_data,
            on_error=self._on_model_data_error,
        )

    def _stop_receiving_models(self) -> None:
        # getattr: rclpy destroys a node whose constructor failed (bad parameters) before it was set
        receiver, self._model_receiver = getattr(self, "_model_receiver", None), None
        if receiver is not None:
            receiver.stop()

    def _on_model_data(self, header: ModelFileHeader, data: memoryview | None) -> None:
        """A model file as bytes (``model_data_topic``), on the receiver's thread: checked, stored,
        hot-reloaded; ``data`` is None when it was over ``max_model_bytes`` (its bytes are gone).
        Refused before anything is written while no model may replace the serving one (cleanup,
        shutdown, the process's end: counted ``node finalized`` once finalized, else
        :data:`MODEL_WHILE_CLOSED`)."""
        where = str(self.params["model_data_topic"])
        closed = self.serving.closed
        if closed:
            reason = FINALIZED if self.finalized else MODEL_WHILE_CLOSED
            self.reject(reason, f"model {header.name!r} received on {where} refused: {closed}")
            return
        self.serving.receive(
            header.kind, header.name, data, header.sha256, where, self.reload, size=header.data_size
        )

    def _on_model_data_error(self, reason: str, detail: str) -> None:
        """A message on ``model_data_topic`` that could not be taken or read (counted)."""
        self.reject(reason, detail)

    # ---------------------------------------------------------------- diagnostics
    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        serving, checkpoints = self.serving, self.serving.checkpoints
        values["lifecycle state"] = self.lifecycle_state
        values["ignored while inactive"] = str(self.ignored_inactive)
        values["checkpoint size [MB]"] = (
            "none written" if checkpoints.nbytes is None else f"{checkpoints.nbytes / 1e6:.2f}"
        )
        if checkpoints.conflicts:
            values["checkpoint conflicts (checkpoint wins)"] = "; ".join(checkpoints.conflicts)
        values["last checkpoint"] = checkpoints.last
        values["last checkpoint error"] = checkpoints.error or "none"
        values["last reload"] = serving.last_reload
        values["ignored model files"] = str(serving.ignored_model_files)
        values["model version"] = str(serving.version)
        history = serving.history
        entries = history.entries()
        pinned = history.pinned(entries)
        beyond = pinned is not None and pinned not in entries[len(entries) - history.keep :]
        values["previous models kept"] = f"{len(entries) - beyond} of {history.keep}"
        values["pinned previous model"] = (
            "none" if pinned is None else f"{pinned.path.name} ({pinned.learned} samples learned here)"
        )
        values["last rollback"] = serving.last_rollback
        values["models received"] = str(serving.received.loaded)
        values["last model received"] = serving.received.last
        values.update(self._metrics_values())
        return values

    def _metrics_values(self) -> dict[str, str]:
        """The means of ``~/learning_metrics`` for diagnostics."""
        with self.metrics.lock:
            msg = self.learning_metrics() if self.metrics.accumulator is not None else None
        if msg is None:
            return {"prequential error (mean)": "none yet"}
        why = f"none yet ({msg.window_samples} samples in the last {msg.window_s:g} s)"
        values = {
            "prequential error (mean)": why
            if msg.mean_prequential_error < 0
            else f"{msg.mean_prequential_error:.4g}"
        }
        if msg.baseline_error:
            mean = msg.mean_baseline_error
            values["baseline error (mean)"] = why if mean < 0 else f"{mean:.4g}"
        values["prequential window samples"] = str(msg.window_samples)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        problems = super().diagnostic_problems()
        checkpoints = self.serving.checkpoints
        if checkpoints.error is not None:
            text = f"checkpoint failing ({checkpoints.error}); last written: {checkpoints.last}"
            problems.append((DiagnosticStatus.ERROR, text))
        return problems

    def idle_message(self) -> str:
        state = self.lifecycle_state
        return "running" if state == "active" else f"{state} (lifecycle)"

    def destroy_node(self) -> None:
        """Destroy the node and its lifecycle services (:meth:`destroy_lifecycle_services`)."""
        self._stop_receiving_models()
        super().destroy_node()
        self.destroy_lifecycle_services()
