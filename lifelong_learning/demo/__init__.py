"""The main job (``make demo`` / ``lifelong-learning demo``): the learners online over DDS
against a simulated robot and camera, ending in a report (see :mod:`.run`, :mod:`.report`)."""
