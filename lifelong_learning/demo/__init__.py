"""The main job (``make demo`` / ``lifelong-learning demo``): the learners online over DDS
against a simulated robot and camera, ending in a report.

- :mod:`.config`: ``DemoConfig``, what the demo does (the full run and the quick one);
- :mod:`.run`: the node processes (through :mod:`lifelong_learning.nodes.supervisor`),
  the phases in order, the results;
- :mod:`.driver`: the demo's own node: the camera, teacher and robot publishers, the answers
  collected, service calls;
- :mod:`.scenarios`: camera + teacher, the robot online, the evaluation trajectory, retraining;
- :mod:`.report`: the markdown report and its plots.
"""
