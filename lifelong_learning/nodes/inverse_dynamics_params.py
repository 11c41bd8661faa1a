"""The parameters of the ``inverse_dynamics`` node, and the settings of its parts taken from them.

Split from :mod:`lifelong_learning.nodes.inverse_dynamics` (the node): what the node declares
(:data:`PARAMS`, listed by ``lifelong-learning params`` and in docs/parameters.md) and how the
model's, the guard's and the URDF's settings are read from the declared values.
"""

from __future__ import annotations

import os
from typing import Any

from lifelong_learning.core.files import MAX_URDF_BYTES, UnsafePathError, open_regular
from lifelong_learning.dynamics.contact import ContactSettings
from lifelong_learning.dynamics.slow_load import SlowLoadSettings
from lifelong_learning.dynamics.starvation import StarvationSettings
from lifelong_learning.nodes.base import ParamSpec
from lifelong_learning.nodes.shadow import shadow_params

#: default ``learning_period_s``: at most one learned block per this many seconds (what arrives
#: meanwhile joins the next block). A block's cost is mostly fixed (solving the weights): in the
#: demo at 100 Hz, 50 ms took a third of the learning CPU of 10 ms, and delays learning by 50 ms
LEARNING_INTERVAL_S = 0.05
#: default ``learn_max_hz``: streams up to 250 Hz are learned whole; a 1 kHz stream every 4th
#: sample, with the same accuracy on new motion (docs/benchmarks/control-rate.md, fifth round)
LEARN_MAX_HZ = 250.0

#: contact detection (docs/robot.md#contact-detection; the rule: dynamics/contact.py)
CONTACT_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "contact_detection",
        True,
        "Publish the external torque estimate (measured − predicted effort) and contact flags for "
        "every joint state answered that carries effort, and learn no sample in contact.",
    ),
    ParamSpec(
        "external_torque_topic",
        "external_torque",
        "sensor_msgs/JointState output: effort = measured − predicted torque per modelled joint "
        "(the prediction made before the sample is learned), stamped like the input.",
    ),
    ParamSpec(
        "contact_topic",
        "contact",
        "std_msgs/Bool output, one per joint state answered with effort: true while in contact.",
    ),
    ParamSpec(
        "contact_estimator",
        "learned_residual",
        "The external torque estimate: learned_residual (measured − the model's prediction), "
        "momentum_observer (the generalized-momentum observer on the URDF: no q̈, no learning) or "
        "learned_observer (the observer with the learned model's correction to the URDF).",
    ),
    ParamSpec(
        "momentum_observer_gain",
        25.0,
        "K_O of the momentum observers [1/s]: the estimate follows a step with time constant 1/K_O; "
        "K_O times the joint-state period must be at most 1.",
        bounds=(0.1, 1000.0),
    ),
    ParamSpec(
        "contact_k",
        6.0,
        "A joint's external torque beyond contact_k robust standard deviations of its free-motion "
        "residual (1.4826 x MAD about the median over contact_window samples, contact samples "
        "excluded) plus contact_min_torque starts a contact. Below 2 nearly every sample would be one.",
        bounds=(2.0, 1000.0),
    ),
    ParamSpec(
        "contact_min_torque",
        2.5,
        "Absolute floor added to every joint's contact threshold [N m]: the errors a learned model "
        "keeps are heavy-tailed (a Panda wrist's Coulomb friction reversal: 2.2 N m in the simulator, "
        "against a robust scale of 0.03); one at or above every joint's effort limit is refused.",
        bounds=(0.0, 10000.0),
    ),
    ParamSpec(
        "contact_release",
        0.5,
        "Hysteresis: a contact ends when every joint is below this fraction of its threshold.",
        bounds=(0.01, 1.0),
    ),
    ParamSpec(
        "contact_min_duration_s",
        0.003,
        "A contact starts (ends) only when the threshold has been exceeded (not exceeded) for this "
        "long, so that a single noisy sample does not trigger; 0 = the first sample.",
        bounds=(0.0, 1.0),
    ),
    ParamSpec(
        "contact_hold_s",
        0.2,
        "Samples this long after a contact ends are not learned either (the arm's own transient).",
        bounds=(0.0, 60.0),
    ),
    ParamSpec(
        "contact_max_s",
        10.0,
        "A load held longer (a contact or a slow load: a payload grasped, a tool resting on a "
        "fixture, a person leaning on the arm) is judged: learned as the new steady state only when "
        "a change of the last link's inertial parameters explains it on every joint (a payload), "
        "else held, not learned, with the reason on /diagnostics.",
        bounds=(0.01, 3600.0),
    ),
    ParamSpec(
        "contact_relearn",
        True,
        "Learn a load held beyond contact_max_s that a payload explains (its held samples too) and "
        "take the thresholds anew; false: every load stays held (not learned) until it goes away.",
    ),
    ParamSpec(
        "contact_payload_share",
        0.9,
        "A held load is a payload when a last-link change explains at least this share of it beyond "
        "the model's own error, and leaves on no joint more than that error plus contact_slow_torque.",
        bounds=(0.5, 1.0),
    ),
    ParamSpec(
        "contact_slow_torque",
        SlowLoadSettings.min_torque,
        "A load building up too slowly for the contact threshold (a person leaning on the arm) is held "
        "when, on a joint, the median over contact_slow_window_s of the measured torque minus a frozen "
        "reference model's prediction (where the reference's data covers the state) exceeds this "
        "[N m], or the residual's robust spread if larger; 0 = off.",
        bounds=(0.0, 1000.0),
    ),
    ParamSpec(
        "contact_slow_window_s",
        SlowLoadSettings.window_s,
        "Seconds of stamps the slow-load median is taken over (it lags a ramp by half of it).",
        bounds=(0.1, 60.0),
    ),
    ParamSpec(
        "contact_reference_s",
        SlowLoadSettings.reference_s,
        "The slow-load reference is the model frozen again at most this often, and only while no load "
        "is seen: a change slower than contact_release x contact_slow_torque per this many seconds is "
        "learned as the robot's own (wear, temperature); a young model's come sooner (4, 8, 16 s...).",
        bounds=(1.0, 86400.0),
    ),
    ParamSpec(
        "contact_window",
        1000,
        "Free-motion residuals the contact thresholds are taken from (samples, not seconds).",
        bounds=(50, 100000),
    ),
)

#: starved learning (docs/diagnostics.md; the rule: dynamics/starvation.py)
STARVATION_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "starvation_window_s",
        StarvationSettings.window_s,
        "Seconds of stamps over which the share of the samples offered for learning (answered with "
        "effort, learning on, not thinned by learn_max_hz) that was not learned is measured.",
        bounds=(0.1, 3600.0),
    ),
    ParamSpec(
        "starvation_share",
        StarvationSettings.threshold,
        "Learning is starved (WARN on /diagnostics and in the log, with the reason and what to do) "
        "while at least this share of the window's samples is not learned; it ends below half of it.",
        bounds=(0.01, 1.0),
    ),
    ParamSpec(
        "learning_off_max_s",
        StarvationSettings.max_off_s,
        "Starved longer than this (seconds of stamps): ERROR on /diagnostics and in the log. The node "
        "goes on answering and learns again as soon as samples may be learned; it never learns a "
        "held load to end the starvation.",
        bounds=(0.1, 86400.0),
    ),
)

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("joint_states_topic", "joint_states", "sensor_msgs/JointState input (best effort, depth 100)."),
    ParamSpec(
        "predicted_torque_topic",
        "predicted_torque",
        "sensor_msgs/JointState output: name + effort (predicted torque), stamped like the input.",
    ),
    ParamSpec(
        "torque_array_topic",
        "predicted_torque_array",
        "std_msgs/Float64MultiArray output: the predicted torques in the model's joint order, what a "
        "ros2_control forward_command_controller (effort) takes as commands; '' disables.",
    ),
    ParamSpec(
        "acceleration_topic",
        "",
        "Optional sensor_msgs/JointState carrying accelerations in its velocity field; '' estimates "
        "them from the joint velocities (causal Savitzky-Golay).",
    ),
    ParamSpec("robot_description", "", "URDF text (standard parameter); used when non-empty."),
    ParamSpec("urdf_path", "", "URDF file, used when robot_description is empty."),
    ParamSpec(
        "robot_description_topic",
        "robot_description",
        "std_msgs/String topic (transient local, as robot_state_publisher publishes) the URDF is "
        "taken from when robot_description and urdf_path are empty.",
    ),
    ParamSpec(
        "joint_names",
        [""],
        "Joints modelled, in output order. [''] = the URDF's moving joints that the incoming joint states "
        "carry, decided from the first messages (logged, stored in the model; a restored checkpoint's "
        "joints win); joints not modelled are locked at 0.",
    ),
    ParamSpec("mode", "semiparametric", "semiparametric | parametric | nonparametric."),
    ParamSpec("prior", "urdf", "Parametric prior: 'urdf' inertial parameters or 'zero'."),
    ParamSpec("n_features", 500, "Random Fourier features of the residual model.", bounds=(0, 100000)),
    ParamSpec("bandwidth", 8.0, "Gaussian kernel bandwidth on the normalized inputs.", bounds=(1e-6, 1e6)),
    ParamSpec("lam_parametric", 0.01, "Ridge λ of the parametric part.", bounds=(1e-12, 1e12)),
    ParamSpec("lam_residual", 0.1, "Ridge λ of the residual part.", bounds=(1e-12, 1e12)),
    ParamSpec(
        "friction_terms",
        ["viscous", "coulomb"],
        "Per-joint friction terms of the parametric part: viscous, coulomb, offset; [''] = none.",
    ),
    ParamSpec(
        "coulomb_smoothing_velocity",
        0.05,
        "v_s of the Coulomb term tanh(qd / v_s) [rad/s].",
        bounds=(1e-6, 100.0),
    ),
    ParamSpec("lam_friction", 0.01, "Ridge λ of the friction parameters (prior zero).", bounds=(1e-12, 1e12)),
    ParamSpec(
        "forgetting",
        "auto",
        "Forgetting factor per sample in [0.5, 1]; 1 = none. 'auto' (the default): the candidates 1, 0.9999, "
        "0.9995, 0.999, 0.998 are raced on small proxies of the residual (a quarter of its features) "
        "and the factor of the lowest prequential error over the last 2000 samples serves the "
        "residual, a factor below 1 only while the best proxy explains at least 90 % of the stream's "
        "variance over that window and its newest quarter (otherwise 1: no memory is traded for "
        "noise); the parametric part does not forget; ~/learning_metrics and the diagnostics "
        "report the factor; about 1.3x the learning cost: docs/metrics.md).",
        bounds=(0.5, 1.0),
        also_auto=True,
    ),
    ParamSpec("seed", 0, "Seed of the random features.", bounds=(0, 2**31 - 1)),
    ParamSpec("acceleration_window", 9, "Samples per acceleration fit.", bounds=(3, 1001)),
    ParamSpec("acceleration_degree", 2, "Polynomial degree of the acceleration fit.", bounds=(1, 5)),
    ParamSpec("learning", True, "Learn from the measured effort (settable at run time).", at_run_time=True),
    ParamSpec(
        "limit_margin",
        1.0,
        "Joint states beyond the URDF's position range widened by this fraction of it, or beyond "
        "(1 + margin) x the velocity limits, are refused; efforts beyond (1 + margin) x the effort "
        "limits are not learned. Wide on purpose: it is for glitches, finer errors are outlier_k's.",
        bounds=(0.0, 100.0),
    ),
    ParamSpec(
        "truncate_predictions",
        True,
        "Bound each answer as KTR3 bounds its predictor: the residual's prediction to the range of the "
        "residual targets it learned, the torque to (1 + limit_margin) x the URDF's effort limits; the "
        "entries clipped are counted in diagnostics ('predictions truncated').",
    ),
    ParamSpec(
        "outlier_k",
        6.0,
        "A sample whose prediction error exceeds this many robust standard deviations (1.4826 x the "
        "median absolute error of the last outlier_window samples, per joint) is not learned; 0 = off.",
        bounds=(0.0, 1000.0),
    ),
    ParamSpec(
        "outlier_window",
        200,
        "Recent prediction errors the outlier scale is taken from.",
        bounds=(10, 100000),
    ),
    ParamSpec(
        "stamp_jump_s",
        1.0,
        "A stamp this much before or after the previous one restarts the acceleration filter (simulator "
        "reset, looping bag, paused driver) instead of being refused.",
        bounds=(0.001, 3600.0),
    ),
    ParamSpec(
        "learn_max_hz",
        LEARN_MAX_HZ,
        "Learn at most this many joint states per second of stamps; the others are answered only "
        "(counted as 'not learned: above learn_max_hz'). 0 = learn every one. The default learns "
        "streams up to 250 Hz whole and every 4th sample of a 1 kHz one: with learning_period_s 0.05, "
        "a quarter of the learning CPU and the same accuracy on new motion, so that the answers keep "
        "their 2 ms at 1 kHz (docs/benchmarks/control-rate.md). Forgetting is per learned sample, so "
        "its horizon in seconds grows by the thinning factor. Settable at run time.",
        bounds=(0.0, 100000.0),
        at_run_time=True,
        minimum_nonzero=1.0,
    ),
    ParamSpec(
        "learning_period_s",
        LEARNING_INTERVAL_S,
        "The learning thread learns what was answered since its last block at most this often, as one "
        "block; a block has a fixed cost (solving the weights), so a longer period costs less CPU and "
        "learns later. Settable at run time.",
        bounds=(0.0, 1.0),
        at_run_time=True,
        minimum_nonzero=0.001,
    ),
    *CONTACT_PARAMS,
    *STARVATION_PARAMS,
    *shadow_params(10.0, 10.0),
    ParamSpec(
        "realtime_priority",
        0,
        "SCHED_FIFO priority (1-99) of the answering path: the thread that takes, predicts and publishes "
        "and the middleware's threads; learning stays at the normal policy. 0 = normal scheduling. "
        "Applied when the node runs in a process of its own; needs an rtprio limit (as ros2_control).",
        bounds=(0, 99),
    ),
)


def model_settings(p: dict[str, Any]) -> dict[str, Any]:
    """The model's arguments from the node's parameters (the URDF comes later: ``urdf`` is '')."""
    names = [n for n in p["joint_names"] if n]
    return {
        "urdf": "",
        "joint_names": names or None,
        "mode": str(p["mode"]),
        "prior": str(p["prior"]),
        "n_features": int(p["n_features"]),
        "bandwidth": float(p["bandwidth"]),
        "lam_parametric": float(p["lam_parametric"]),
        "lam_residual": float(p["lam_residual"]),
        "friction": tuple(t for t in p["friction_terms"] if t),
        "coulomb_smoothing": float(p["coulomb_smoothing_velocity"]),
        "lam_friction": float(p["lam_friction"]),
        "forgetting": forgetting_setting(p["forgetting"]),
        "seed": int(p["seed"]),
    }


def forgetting_setting(value: Any) -> float | str:
    """``forgetting``: ``"auto"`` or a number (ValueError otherwise)."""
    if isinstance(value, str) and value.strip() == "auto":
        return "auto"
    # dynamically typed (for 'auto'): rclpy checks the range of a double only, not of an integer
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.5 <= float(value) <= 1.0:
        raise ValueError(f"forgetting must be a number in [0.5, 1] or 'auto', got {value!r}")
    return float(value)


def forgetting_text(model: Any) -> str:
    """The diagnostics' ``forgetting``: the factor that serves, and ``(auto)`` when it is chosen on the
    stream (``auto, 0.999 serving``)."""
    serving = f"{model.serving_forgetting:g}"
    return f"auto, {serving} serving" if model.forgetting == "auto" else serving


def guard_settings(p: dict[str, Any]) -> dict[str, Any]:
    """The :class:`SampleGuard`'s arguments (besides the joint limits) from the node's parameters."""
    return {
        "margin": float(p["limit_margin"]),
        "window": int(p["acceleration_window"]),
        "degree": int(p["acceleration_degree"]),
        "stamp_jump_s": float(p["stamp_jump_s"]),
        "outlier_k": float(p["outlier_k"]),
        "outlier_window": int(p["outlier_window"]),
        "learn_max_hz": float(p["learn_max_hz"]),
    }


def contact_settings(p: dict[str, Any]) -> ContactSettings | None:
    """The contact detector's settings from the node's parameters (None: ``contact_detection`` off);
    checked (ValueError with the parameter's name)."""
    if not p["contact_detection"]:
        return None
    settings = ContactSettings(
        k=float(p["contact_k"]),
        min_torque=float(p["contact_min_torque"]),
        release=float(p["contact_release"]),
        min_duration_s=float(p["contact_min_duration_s"]),
        hold_s=float(p["contact_hold_s"]),
        max_s=float(p["contact_max_s"]),
        relearn=bool(p["contact_relearn"]),
        window=int(p["contact_window"]),
    )
    settings.check()
    return settings


def slow_load_settings(p: dict[str, Any]) -> SlowLoadSettings:
    """The slow-load detector's settings from the node's parameters (checked: ValueError)."""
    settings = SlowLoadSettings(
        min_torque=float(p["contact_slow_torque"]),
        window_s=float(p["contact_slow_window_s"]),
        release=float(p["contact_release"]),
        reference_s=float(p["contact_reference_s"]),
    )
    settings.check()
    return settings


def starvation_settings(p: dict[str, Any]) -> StarvationSettings:
    """The starvation monitor's settings from the node's parameters (checked: ValueError)."""
    settings = StarvationSettings(
        window_s=float(p["starvation_window_s"]),
        threshold=float(p["starvation_share"]),
        max_off_s=float(p["learning_off_max_s"]),
    )
    settings.check()
    return settings


def urdf_from_parameters(p: dict[str, Any]) -> str:
    """The URDF text of ``robot_description``, else of the file ``urdf_path``; '' when both are empty
    (it then comes from ``robot_description_topic``).

    Only a regular file of at most :data:`MAX_URDF_BYTES` is read (a FIFO would block the node's
    start, ``/dev/zero`` would never end).

    Raises:
        OSError: ``urdf_path`` is missing, unreadable, not a regular file or too large.
    """
    urdf = str(p["robot_description"])
    if not urdf.strip() and p["urdf_path"]:
        path = os.path.expanduser(str(p["urdf_path"]))
        try:
            with open_regular(path, MAX_URDF_BYTES) as f:
                urdf = f.read(MAX_URDF_BYTES + 1).decode("utf-8")
        except UnsafePathError as exc:
            raise OSError(f"urdf_path: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise OSError(f"urdf_path {path} is not UTF-8 text: {exc}") from exc
    return urdf if urdf.strip() else ""
