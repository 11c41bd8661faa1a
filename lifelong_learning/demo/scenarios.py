"""What the demo plays over DDS, phase by phase, and how it scores the answers.

- camera + teacher (:func:`teach_objects`, :func:`recognition_after_retraining`): a person shows
  each object to a still camera in its teaching room (pybullet renderings composited on a cluttered
  room, :mod:`lifelong_learning.sim.showing`), naming it on ``teacher_label`` (one only briefly: the
  rare class); after some objects every object taught so far is shown unlabelled in its test room
  (another room, light, poses) and the ``prediction`` answers scored against the truth;
- robot online (:func:`robot_online`): the simulated Panda's ``joint_states`` in real time,
  a payload grasped part-way, answered with predicted torques, scored per joint (nMSE) next
  to the URDF's own RNEA;
- evaluation (:func:`evaluation_log`, :func:`set_learning`, :func:`drive`,
  :func:`evaluation_results`): a new trajectory, learning frozen, answered by the online and
  then by the retrained model;
- retraining (:func:`split_bag`, :func:`retrain`): the bag's current file closed, both learners
  tuned from it by ``nystrom_tuner``, and their hot reload awaited.

Each fills its part of the ``results`` dictionary the report is written from.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from std_srvs.srv import Trigger

from lifelong_learning.action import TuneModel
from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.demo import contact as demo_contact
from lifelong_learning.demo import showings as demo_showings
from lifelong_learning.demo.config import DemoConfig
from lifelong_learning.demo.driver import TUNE_ACTION, DemoDriver
from lifelong_learning.demo.shadow import ShadowEvents, shadow_window
from lifelong_learning.dynamics.regressor import RigidBodyRegressor
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.sim.objects import ObjectRenderer, object_catalog
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path, panda_urdf_text
from lifelong_learning.sim.showing import ShownFrame, show_object
from lifelong_learning.srv import SaveModel

#: the physics step of :class:`PandaSimulation` (its default), s
SIM_TIMESTEP_S = 0.002


@dataclass
class Stage:
    """What every scenario works with: the configuration, the driver node, the run folder."""

    cfg: DemoConfig
    driver: DemoDriver
    out: Path
    say: Callable[[str], None]
    check_alive: Callable[[], None]  # raises RuntimeError when a node process has exited


# --------------------------------------------------------------------------- scoring
def nmse_windows(
    t: np.ndarray,
    tau: np.ndarray,
    predictions: dict[str, np.ndarray],
    window: int,
    variance: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Per-joint nMSE of each prediction series in consecutive windows of ``window`` samples.

    nMSE = mean squared error over the window / ``variance`` (default: the variance of ``tau`` over
    the whole trajectory). Rows of NaN (unanswered messages, rows left out) are left out; a window
    with none answered gives NaN.
    """
    var = np.var(tau, axis=0) if variance is None else variance
    out = []
    for start in range(0, len(t) - window + 1, window):
        sl = slice(start, start + window)
        w: dict[str, Any] = {"t_end": float(t[sl][-1])}
        for name, pred in predictions.items():
            w[name] = nmse(tau[sl], pred[sl], variance=var)
        out.append(w)
    return out


def nmse(tau: np.ndarray, pred: np.ndarray, variance: np.ndarray | None = None) -> list[float]:
    """Per-joint nMSE over the answered rows of ``pred`` (normalized by ``variance``, default the
    variance of ``tau``); NaN when no row was answered."""
    ok = ~np.isnan(pred).any(axis=1)
    var = np.var(tau, axis=0) if variance is None else variance
    return normalized_mse(tau[ok], pred[ok], variance=var).tolist()


# --------------------------------------------------------------------------- camera + teacher


class Camera:
    """The demo's camera: objects shown by a person to a still camera, a teaching room and a test
    room per object (:mod:`lifelong_learning.sim.showing`), published at the camera rate. Each showing
    starts with ``lead_in_frames`` frames of the empty room (the extractor's ``motion`` crop learns the
    background from them); a session's frames are rendered once and shown again when asked again."""

    def __init__(self, stage: Stage, renderer: ObjectRenderer) -> None:
        self.stage, self.renderer = stage, renderer
        self._sessions: dict[tuple[int, str, int], list[ShownFrame]] = {}

    def frames(self, obj: int, session: str, n: int) -> list[ShownFrame]:
        """The lead-in and ``n`` frames of object ``obj``'s ``session``."""
        key = (obj, session, n)
        if key not in self._sessions:
            cfg = self.stage.cfg
            self._sessions[key] = show_object(
                self.renderer, obj, session, n, cfg.image_size, cfg.seed, lead_in=cfg.lead_in_frames
            )
        return self._sessions[key]

    def publish(self, frames: list[ShownFrame]) -> list[int]:
        """Publish ``frames`` at the camera rate; their stamps."""
        period = 1.0 / self.stage.cfg.camera_hz
        stamps = []
        for frame in frames:
            t = time.monotonic()
            stamps.append(self.stage.driver.publish_frame(frame.image))
            time.sleep(max(0.0, period - (time.monotonic() - t)))
        return stamps

    def show(self, objects: list[int], session: str, n: int) -> list[tuple[int, int]]:
        """Show each object of ``objects`` in its ``session`` room; (stamp, object) of the frames
        that show it (the lead-in's are not scored)."""
        lead = self.stage.cfg.lead_in_frames
        sent = []
        for obj in objects:
            stamps = self.publish(self.frames(obj, session, n))
            sent += [(stamp, obj) for stamp in stamps[lead:]]
        return sent


def score(driver: DemoDriver, sent: list[tuple[int, int]], names: list[str], rare: int) -> dict[str, Any]:
    """Wait (≤ 5 s) for the answers to ``sent`` and score them against the truth."""
    stamps = [s for s, _ in sent]
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if all(a is not None for a in driver.answered_predictions(stamps).values()):
            break
        time.sleep(0.05)
    answers = driver.answered_predictions(stamps)
    correct = [answers[s] is not None and answers[s][0] == names[o] for s, o in sent]
    rare_ok = [c for (_, o), c in zip(sent, correct, strict=True) if o == rare]
    return {
        "accuracy": float(np.mean(correct)),
        "rare_accuracy": float(np.mean(rare_ok)) if rare_ok else None,
        "n_test": len(sent),
        "n_answered": sum(a is not None for a in answers.values()),
        "latencies": [1e3 * (answers[s][1] - s / 1e9) for s, _ in sent if answers[s] is not None],
    }


def score_rounds(n_objects: int) -> list[int]:
    """After which objects taught every taught object is shown and scored: each of the first five,
    then about every fifth of the rest, and the last."""
    step = max(1, n_objects // 5)
    return sorted({*range(1, min(5, n_objects) + 1), *range(5 + step, n_objects, step), n_objects})


def teach_objects(stage: Stage, renderer: ObjectRenderer, results: dict[str, Any]) -> None:
    """Teach every object in turn (in its teaching room), scoring recognition of all the taught
    ones (in their test rooms) after those of :func:`score_rounds`."""
    cfg = stage.cfg
    names = [o.name for o in object_catalog(cfg.n_objects, cfg.seed)]
    rare = cfg.n_objects // 2
    camera = Camera(stage, renderer)
    rounds, latencies = [], []
    for k in range(cfg.n_objects):
        n_lab = cfg.rare_labeled_frames if k == rare else cfg.labeled_frames
        stage.say(f"teacher: this is '{names[k]}' ({n_lab} labelled frames)")
        frames = camera.frames(k, "teach", n_lab)
        camera.publish(frames[: cfg.lead_in_frames])  # the room, before the object comes
        stage.driver.publish_label(names[k])
        time.sleep(0.5)
        camera.publish(frames[cfg.lead_in_frames :])
        time.sleep(0.5)
        stage.driver.publish_label("")
        time.sleep(0.5)
        if k + 1 not in score_rounds(cfg.n_objects):
            continue
        sent = camera.show(list(range(k + 1)), "test", cfg.test_frames_per_object)
        r = {
            **score(stage.driver, sent, names, rare),
            **demo_showings.showing_score(stage.driver, sent, names, rare),
        }
        latencies += r.pop("latencies")
        rounds.append({"n_taught": k + 1, **r})
        stage.say(
            f"recognition after {k + 1} objects: {100 * r['accuracy']:.0f}% of {len(sent)} views, "
            f"{100 * r['showing_accuracy']:.0f}% of {r['n_showings']} showings"
        )
    extractor = stage.driver.diagnostics_now().get("feature_extractor", {})
    results["recognition"] = {
        "names": names,
        "network": extractor.get("network", "?"),
        "pasted": extractor.get("pasted", ""),  # copies of moving frames onto rooms seen before
        "n_objects": cfg.n_objects,
        "labeled_per_object": cfg.labeled_frames,
        "rare_object": names[rare],
        "rare_labeled": cfg.rare_labeled_frames,
        "crop": cfg.crop,
        "rounds": rounds,
    }
    results.setdefault("latency_ms", {})["image → prediction"] = latencies
    # objects never taught, then objects taught only by answering the robot's questions
    catalog = [o.name for o in object_catalog(cfg.n_objects + cfg.new_objects + cfg.asked_objects, cfg.seed)]
    demo_showings.never_taught(stage, camera, results, cfg.n_objects)
    demo_showings.taught_by_answers(stage, camera, results, catalog, cfg.n_objects + cfg.new_objects)


def recognition_after_retraining(stage: Stage, renderer: ObjectRenderer, results: dict[str, Any]) -> None:
    """Show every object again in its test room, answered by the retrained classifier."""
    cfg = stage.cfg
    rec = results["recognition"]
    sent = Camera(stage, renderer).show(list(range(cfg.n_objects)), "test", cfg.test_frames_per_object)
    r = score(stage.driver, sent, rec["names"], cfg.n_objects // 2)
    r.update(demo_showings.showing_score(stage.driver, sent, rec["names"], cfg.n_objects // 2))
    r.pop("latencies")
    rec["after_retraining"] = r
    stage.say(f"recognition with the retrained model: {100 * r['accuracy']:.0f}% of {len(sent)} views")


# --------------------------------------------------------------------------- robot
def stride(cfg: DemoConfig) -> int:
    """Simulation steps per published joint state."""
    return max(1, round(1.0 / (cfg.joint_state_hz * SIM_TIMESTEP_S)))


def drive(
    stage: Stage, log: dict[str, np.ndarray], what: str, until: Callable[[], bool] | None = None
) -> dict[str, Any]:
    """Publish ``log`` as joint_states in real time; collect the torques answered.

    Each message is stamped with its sample's simulation time (offset to now), so the
    node's acceleration estimate sees the true sample spacing even when the machine is busy.
    ``until``: asked every 0.1 s of the log; once true the robot stops there (the log is cut).
    """
    names = list(JOINT_NAMES)
    t = log["t"] - log["t"][0]
    stamps = time.time_ns() + np.round(t * 1e9).astype(np.int64)
    sent = np.zeros(t.size)  # wall time of each publish (the stamp is the sample's time)
    t_start = time.monotonic()
    stage.say(f"robot ({what}): {t[-1]:.0f} s at {stage.cfg.joint_state_hz:.0f} Hz")
    every = max(1, round(0.1 * stage.cfg.joint_state_hz))
    for i in range(t.size):
        if until is not None and i % every == 0 and i > 0 and until():
            t, stamps, sent = t[:i], stamps[:i], sent[:i]
            break
        delay = t_start + t[i] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sent[i] = time.time()
        stage.driver.publish_joint_state(names, log["q"][i], log["qd"][i], log["tau"][i], int(stamps[i]))
    got = stage.driver.settled_torques(stamps)  # until the answers stop arriving (1 s quiet)
    pred = np.array([g[0] if g is not None else np.full(len(names), np.nan) for g in got])
    answered = int(sum(g is not None for g in got))
    stage.say(f"robot ({what}): {answered}/{t.size} joint states answered")
    return {
        "pred": pred,
        "answered": answered,
        "published": int(t.size),
        "latencies": [1e3 * (g[1] - s) for g, s in zip(got, sent, strict=True) if g is not None],
        "answer_latencies": [1e3 * (g[2] - s) for g, s in zip(got, sent, strict=True) if g is not None],
        "publish_lag_ms": [1e3 * (s - ns / 1e9) for s, ns in zip(sent, stamps, strict=True)],
        "stamps": stamps,
        # inverse_dynamics' contact flags on these joint states (demo/contact.py)
        "contact": demo_contact.onsets_on(stage.driver.contact_record(quiet_s=0.3), stamps),
    }


def _rnea(log: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """The torques the URDF's rigid-body model alone predicts along ``log``."""
    return RigidBodyRegressor(panda_urdf_text(), names).rnea(log["q"], log["qd"], log["qdd"])


def robot_online(stage: Stage, results: dict[str, Any]) -> None:
    """The robot works (a payload grasped part-way, a few pushes: :mod:`~lifelong_learning.demo.contact`)
    while inverse_dynamics learns online. The nMSE windows leave the pushes out (the model is
    scored on the arm's own motion); ``results["dynamics"]["contact"]`` scores the node's
    external torque estimate and contact flags against the pushes."""
    cfg = stage.cfg
    sim = PandaSimulation()
    payload_at = cfg.payload_at_fraction * cfg.robot_seconds
    pushes = demo_contact.demo_pushes(cfg, sim, payload_at)
    log = sim.run(
        cfg.robot_seconds,
        seed=cfg.seed,
        log_every=stride(cfg),
        payload_mass=1.0,
        payload_at=payload_at,
        pushes=pushes,
    )
    names = list(sim.joint_names)
    rnea = _rnea(log, names)
    online = drive(stage, log, "online learning")
    window = max(50, len(log["t"]) // 30)
    free = demo_contact.free_rows(log["t"] - log["t"][0], pushes)
    scored = {k: np.where(free[:, None], v, np.nan) for k, v in (("rnea", rnea), ("online", online["pred"]))}
    windows = nmse_windows(log["t"], log["tau"], scored, window, variance=np.var(log["tau"][free], axis=0))
    before = [w for w in windows if w["t_end"] < payload_at]
    lag = online["publish_lag_ms"]
    results["dynamics"] = {
        "joint_names": names,
        "rate_hz": cfg.joint_state_hz,
        "duration_s": cfg.robot_seconds,
        "payload_at": payload_at,
        "windows": windows,
        "final_rnea": windows[-1]["rnea"],
        "final_online": windows[-1]["online"],
        "before_payload_online": (before[-1] if before else windows[0])["online"],
        "before_payload_rnea": (before[-1] if before else windows[0])["rnea"],
        "published": online["published"],
        "answered": online["answered"],
        "publisher_lag_ms": {"p50": float(np.percentile(lag, 50)), "p99": float(np.percentile(lag, 99))},
        "contact": demo_contact.recorded_results(
            log, online["stamps"], stage.driver.contact_record(), pushes, payload_at, names
        ),
    }
    results.setdefault("latency_ms", {})["joint_states → torques"] = online["latencies"]
    # the same answers, to the time inverse_dynamics published them (their DDS source time): without
    # the wait for this busy process's executor to take them
    results["latency_ms"]["joint_states → torques published"] = online["answer_latencies"]


def evaluation_log(cfg: DemoConfig) -> dict[str, np.ndarray]:
    """A new trajectory (another seed) with the payload held from the start."""
    return PandaSimulation().run(
        cfg.eval_seconds, seed=cfg.seed + 1000, log_every=stride(cfg), payload_mass=1.0, payload_at=0.0
    )


def set_flag(stage: Stage, node: str, name: str, on: bool) -> None:
    """Set the boolean parameter ``name`` of ``node`` (RuntimeError when refused)."""
    value = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=on)
    req = SetParameters.Request(parameters=[Parameter(name=name, value=value)])
    res = stage.driver.call(SetParameters, f"/{node}/set_parameters", req)
    if not res.results or not res.results[0].successful:
        raise RuntimeError(f"could not set {node} {name}={on}: {res}")
    stage.say(f"{node}: {name} {'on' if on else 'off'}")


def set_learning(stage: Stage, on: bool) -> None:
    """Switch inverse_dynamics' online learning on or off (its ``learning`` parameter)."""
    set_flag(stage, "inverse_dynamics", "learning", on)


def evaluation_results(
    cfg: DemoConfig,
    log: dict[str, np.ndarray],
    online: dict[str, Any],
    retrained: dict[str, Any],
    results: dict[str, Any],
) -> None:
    """nMSE on the evaluation trajectory: RNEA, the online model, the retrained model."""
    rnea = _rnea(log, list(JOINT_NAMES))
    tau = log["tau"]
    window = max(50, len(log["t"]) // 10)
    series = {"rnea": rnea, "online": online["pred"], "retrained": retrained["pred"]}
    results["dynamics"]["evaluation"] = {
        "duration_s": cfg.eval_seconds,
        "seed": cfg.seed + 1000,
        "rnea": nmse(tau, rnea),
        "online": nmse(tau, online["pred"]),
        "retrained": nmse(tau, retrained["pred"]),
        "answered_online": online["answered"],
        "answered_retrained": retrained["answered"],
        "published": online["published"],
        "windows": nmse_windows(log["t"], tau, series, window),
    }
    if "contact" in results["dynamics"]:  # false alarms: the evaluation has no pushes
        results["dynamics"]["contact"]["evaluation"] = {
            "online": online["contact"],
            "retrained": retrained["contact"],
        }


# --------------------------------------------------------------------------- bag + retraining
def split_bag(stage: Stage, results: dict[str, Any]) -> None:
    """Close the bag's current file: everything recorded so far becomes readable."""
    res = stage.driver.call(Trigger, "/bag_recorder/split_bagfile", Trigger.Request())
    if not res.success:
        raise RuntimeError(f"bag split failed: {res.message}")
    stage.say(f"bag recorder: {res.message}")
    results["bag"] = {"split": res.message}


def _serving_model(stage: Stage, learner: str) -> str:
    """The learner's serving model, saved (~/save_model) into the models folder: the gate's reference."""
    path = stage.out / "models" / f"serving-{learner}.llm"
    res = stage.driver.call(SaveModel, f"/{learner}/save_model", SaveModel.Request(path=str(path)))
    if not res.success:
        raise RuntimeError(f"{learner} did not save its serving model: {res.message}")
    return str(path)


def validation_bag(stage: Stage) -> str:
    """A validation run for the dynamics gate: a trajectory of its own (another seed than the online
    phase and the evaluation, the payload held), new to the online and the retrained model alike.

    On a robot this is a bag recorded with learning off; here the simulated trajectory is written
    to a bag directly (what the recorder would have stored), which saves the demo 15 s of replay.
    """
    cfg = stage.cfg
    log = PandaSimulation().run(
        cfg.eval_seconds, seed=cfg.seed + 2000, log_every=stride(cfg), payload_mass=1.0, payload_at=0.0
    )
    path = stage.out / "validation_bag"
    write_joint_states(path, log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    return str(path)


def tune(stage: Stage, task: str, serving: str, validation: list[str]) -> dict[str, Any]:
    """Retrain ``task`` from the bag with nystrom_tuner's action; the gate compares with ``serving``
    (on ``validation`` bags when given, else on the bag's most recent part)."""
    goal = TuneModel.Goal(
        bags=[str(stage.out / "bag")],
        task=task,
        centers=stage.cfg.tune_centers,
        epochs=stage.cfg.tune_epochs,
        urdf_path=panda_urdf_path() if task == "inverse-dynamics" else "",
        serving_model=serving,
        validation_bags=validation,
    )
    t0 = time.monotonic()
    stage.say(f"tuner: {task} goal sent")
    accepted, result = stage.driver.run_goal(TUNE_ACTION, goal)
    if not accepted:
        raise RuntimeError(f"the tuner rejected the {task} goal (its log and diagnostics say why)")
    if not result.success:
        raise RuntimeError(f"{task} tuning: {result.message}")
    seconds = time.monotonic() - t0
    report = json.loads(Path(result.report_path).read_text(encoding="utf-8"))
    stage.say(f"tuner: {task} model {result.out_path} after {seconds:.0f} s; {result.message}")
    return {
        "task": task,
        "seconds": seconds,
        "model": result.out_path,
        "objectives": report["objectives"],
        "promotion": report["promotion"],
    }


def _wait_for_reload(stage: Stage, learner: str, version: int, model: str) -> dict[str, Any]:
    """Wait (≤ 60 s) until ``learner`` reports a model version above ``version``."""
    t0 = time.monotonic()
    while stage.driver.model_version(learner) <= version and time.monotonic() - t0 < 60.0:
        stage.check_alive()
        time.sleep(0.1)
    new = stage.driver.model_version(learner)
    if new <= version:
        raise RuntimeError(f"{learner} did not reload the announced model {model}")
    reload = {
        "node": learner,
        "model_version": [version, new],
        "seconds_after_announcement": time.monotonic() - t0,
    }
    reload["last_reload"] = stage.driver.diagnostics_now().get(learner, {}).get("last reload", "")
    stage.say(f"{learner} hot-reloaded the tuned model (model version {version} → {new})")
    return reload


def _drive_learning(stage: Stage, log: dict[str, np.ndarray], until: Callable[[], bool]) -> None:
    """Publish ``log`` as joint states with inverse_dynamics learning (frozen again after), until
    ``until()`` says the node has what it needs."""
    set_learning(stage, True)
    try:
        drive(stage, log, "shadow window, learning on", until)
    finally:
        set_learning(stage, False)


def retrain(stage: Stage, results: dict[str, Any]) -> None:
    """Retrain both learners from the bag; a promoted model is waited for until its node hot-reloaded
    it, a refused one leaves the online model serving (the report says which served); with
    ``shadow_seconds``, the promoted dynamics model first runs in shadow on the robot
    (:func:`~lifelong_learning.demo.shadow.shadow_window`) and is swapped in only if it wins. The dynamics
    gate scores on a validation bag (:func:`validation_bag`); the classifier's on the most recent
    views of each object, which the online model has learned from (the gate then favours it)."""
    jobs = []
    events = ShadowEvents(stage.driver) if stage.cfg.shadow_seconds > 0 else None
    for task, learner in (("classification", "object_recognition"), ("inverse-dynamics", "inverse_dynamics")):
        version = stage.driver.model_version(learner)
        validation = [validation_bag(stage)] if task == "inverse-dynamics" else []
        after = events.count() if events is not None else 0
        job = tune(stage, task, _serving_model(stage, learner), validation)
        if job["promotion"]["promoted"] and task == "inverse-dynamics" and events is not None:
            drive_learning = functools.partial(_drive_learning, stage)
            job["shadow"] = shadow_window(stage, events, after, results, drive_learning, stride(stage.cfg))
        if job["promotion"]["promoted"] and task == "classification":
            # object_recognition's shadow window (on by default) judges it on what is taught next
            job["reload"] = {}
            stage.say(f"{learner}: the candidate runs in shadow, judged on the next taught views")
        elif job["promotion"]["promoted"] and job.get("shadow", {"promoted": True})["promoted"]:
            job["reload"] = _wait_for_reload(stage, learner, version, job["model"])
        else:
            job["reload"] = {}
            why = "the candidate was not promoted" if "shadow" not in job else "it lost in shadow"
            stage.say(f"{learner} keeps its online model: {why}")
        jobs.append(job)
    results["retraining"] = jobs
