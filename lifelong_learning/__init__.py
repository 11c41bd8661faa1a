"""lifelong_learning: a robot that keeps learning while it works.

Layers, lowest first; a module imports only from layers below its own (and from its own
subpackage). ``test/test_layers.py`` checks every import against :data:`LAYERS`.

0. :mod:`~lifelong_learning.core`: what every layer shares: atomic writes (``files``), the
   versioned model file (``model_file``), the persistence contract of the learners
   (``persistence``), the input check (``checks``), error measures (``metrics``), jittered
   Cholesky (``linalg``), messages sent but never processed (``losses``).
1. :mod:`~lifelong_learning.learners`: the one recursive regularized least squares engine
   (:class:`~lifelong_learning.learners.RecursiveRLS`), feature maps, the incremental classifier;
   :mod:`~lifelong_learning.vision`: images → CNN features; :mod:`~lifelong_learning.sim`: the
   simulated robot and camera (a physics simulator and a renderer standing in for hardware).
2. :mod:`~lifelong_learning.dynamics`: rigid-body regressor, q̈ filter, semiparametric inverse dynamics.
3. :mod:`~lifelong_learning.nystrom`: Nyström KRR, tuning objectives and tuning (torch), export
   to the online learners.
4. :mod:`~lifelong_learning.io`: rosbag2 reading and recording without rclpy; with it the
   generated interfaces ``lifelong_learning.msg`` / ``srv`` / ``action`` (built by colcon).
5. :mod:`~lifelong_learning.retraining`: offline jobs, bags → tuned model file + report;
   :mod:`~lifelong_learning.serving`: the serving core of a learner node (the model under a lock,
   its atomic swap, hot reload, models received as bytes, rollback history, checkpoints).
6. :mod:`~lifelong_learning.nodes`: thin rclpy adapters, the process supervisor, the node catalog.
7. :mod:`~lifelong_learning.demo`: the main job, the whole lifelong loop over DDS.
8. :mod:`~lifelong_learning.commands`: the subcommands of ``lifelong-learning``;
9. :mod:`~lifelong_learning.cli`: the ``lifelong-learning`` entry point.

Layers 0-5 import neither rclpy nor ROS messages; importing this package imports neither rclpy
nor torch.
"""

__version__ = "0.1.0"

#: the layers, lowest first: a module may import from its own subpackage and from lower layers only
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("learners", "vision", "sim"),
    ("dynamics",),
    ("nystrom",),
    ("io", "msg", "srv", "action"),
    ("retraining", "serving"),
    ("nodes",),
    ("demo",),
    ("commands",),
    ("cli",),
)


def _find_generated_interfaces() -> None:
    """Imported from a source checkout (e.g. ``python -c ...`` in the repository root, where the
    working directory comes first on ``sys.path``), this package lacks the interfaces colcon
    generates (``msg``, ``srv``, ``action`` and their type-support libraries); take those from the
    built copy further down ``sys.path`` (the install space ``scripts/env.sh`` sources). The rest
    of the package still comes from the checkout. Nothing changes for the installed package."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "msg")):
        return
    for entry in sys.path:
        candidate = os.path.join(os.path.abspath(entry or os.curdir), __name__)
        if os.path.isdir(os.path.join(candidate, "msg")) and os.path.realpath(candidate) != os.path.realpath(
            here
        ):
            __path__.append(candidate)
            return


_find_generated_interfaces()
