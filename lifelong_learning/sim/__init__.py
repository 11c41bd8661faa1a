"""Simulated stand-ins for a robot (no ROS imports): a MuJoCo Panda arm and a pybullet
object scene seen by a camera. They are the "real robot" of tests, benchmarks and the demo."""
