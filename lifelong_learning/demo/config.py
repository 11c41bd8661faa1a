"""What the demo does: how many objects and frames, how long the robot runs, how hard the tuner
works (:class:`DemoConfig`, the full run and :meth:`DemoConfig.quick`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DemoConfig:
    """What the demo does; the defaults finish in under 5 minutes on a 2-core machine."""

    n_objects: int = 15
    labeled_frames: int = (
        24  # more frames of a showing taught: better (docs/benchmarks/recognition-showing.md)
    )
    rare_labeled_frames: int = 3
    test_frames_per_object: int = 4
    new_objects: int = 3  # shown in their test rooms, never taught: answered "I don't know"?
    asked_objects: int = 2  # taught only by answering the robot's questions
    lead_in_frames: int = 3  # of the empty room before each showing (the motion crop's background)
    image_size: tuple[int, int] = (240, 320)  # height, width
    camera_hz: float = 12.0
    crop: str = "motion"  # feature_extractor's crop: the object cut out of the room
    robot_seconds: float = 90.0
    eval_seconds: float = 15.0
    joint_state_hz: float = 100.0
    payload_at_fraction: float = 0.6
    # a person pushes the arm (demo/contact.py): how often, from when, the largest joint torque [N m]
    pushes: int = 5
    push_after_s: float = 15.0
    push_torque: tuple[float, float] = (5.0, 10.0)
    tune_centers: int = 400  # as in docs/benchmarks/retraining.md
    tune_epochs: int = 40
    seed: int = 0
    # seconds the retrained dynamics model runs in shadow on the robot before it may serve (0: none)
    shadow_seconds: float = 8.0
    # the lifelong loop (demo/lifelong_loop.py): the heavier payload, when it is grasped, the most
    # robot seconds, the seconds driven after the cycle ended; the nodes' settings for it
    loop_payload_kg: float = 3.0
    loop_grasp_s: float = 16.0  # after one metrics window of learning: the drift alarm's reference
    loop_max_s: float = 150.0
    loop_after_s: float = 10.0  # the live error is defined again half a metrics window after a swap
    bag_file_s: float = 5.0  # bag_recorder's max_bagfile_duration_s: the loop retrains on closed files
    metrics_window_s: float = 10.0  # inverse_dynamics' live error window (and the drift alarm's warm-up)
    drift_window_s: float = 3.0
    loop_bag_files: int = 3  # the tuner's retrain_bag_files
    # inverse_dynamics' realtime_priority (SCHED_FIFO of its answering path, as on a robot; 0: normal)
    realtime_priority: int = 0

    @classmethod
    def quick(cls) -> DemoConfig:
        """A short run for CI (about a minute)."""
        return cls(
            n_objects=3,
            labeled_frames=10,
            rare_labeled_frames=2,
            test_frames_per_object=3,
            new_objects=2,
            asked_objects=1,
            robot_seconds=20.0,
            eval_seconds=5.0,
            tune_centers=50,
            tune_epochs=10,
            pushes=2,  # at 5.8 and 7.2 s, before the grasp at 12 s (demo/contact.py)
            push_after_s=5.0,
            shadow_seconds=3.0,
            # a 5 s live error window: the drift alarm's reference is set 5 s after learning starts
            # (not 10), the robot grasps the heavier payload 4 s later, and the error is defined
            # again 2.5 s after a swap (so 6 s after the cycle show it)
            metrics_window_s=5.0,
            loop_grasp_s=9.0,
            loop_max_s=90.0,
            loop_after_s=6.0,
            bag_file_s=3.0,
            drift_window_s=2.0,
        )
