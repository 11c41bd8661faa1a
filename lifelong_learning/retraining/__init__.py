"""Offline retraining jobs (no ROS imports): from logged bags to a model file the online nodes
load, with a report. Above :mod:`lifelong_learning.io` (it reads bags) and below the nodes and
commands that run it.

- :mod:`~lifelong_learning.retraining.job`: what a job is (:class:`~.job.TuningJob`, each option
  declared once through :mod:`~lifelong_learning.retraining.options`) and its validation;
- :mod:`~lifelong_learning.retraining.pipeline`: :func:`~.pipeline.run_job`, which drives a
  :class:`~lifelong_learning.retraining.task.Task`: :mod:`~lifelong_learning.retraining.classification`
  or :mod:`~lifelong_learning.retraining.inverse_dynamics` (its joint states read by
  :mod:`~lifelong_learning.retraining.joint_states` into :mod:`~lifelong_learning.retraining.rows`);
- :mod:`~lifelong_learning.retraining.promotion` (the gate) and
  :mod:`~lifelong_learning.retraining.report` (the markdown and JSON report).
"""
