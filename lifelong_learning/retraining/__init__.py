"""Offline retraining jobs (no ROS imports): from logged bags to a model file the online nodes
load, with a report. Above :mod:`lifelong_learning.io` (it reads bags) and below the nodes and
commands that run it."""
