"""Simulated stand-ins for a robot (no ROS imports): MuJoCo arms (the Panda in :mod:`.panda`, a UR5
built from its URDF and the shared controller in :mod:`.arm`) and a pybullet object scene seen by
a camera. They are the "real robot" of tests, benchmarks and the demo."""
