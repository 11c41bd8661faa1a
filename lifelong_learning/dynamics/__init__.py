"""Online inverse dynamics (thesis ch. 8): rigid-body regressor, parametric / random-features /
semiparametric learners, joint friction, and the joint-acceleration estimator. No ROS imports."""

from lifelong_learning.dynamics.acceleration import AccelerationEstimator, estimate_accelerations
from lifelong_learning.dynamics.friction import JointFriction
from lifelong_learning.dynamics.regressor import RigidBodyRegressor
from lifelong_learning.dynamics.semiparametric import (
    SemiparametricInverseDynamics,
    residual_features,
    select_hyperparameters,
)

__all__ = [
    "AccelerationEstimator",
    "JointFriction",
    "RigidBodyRegressor",
    "SemiparametricInverseDynamics",
    "estimate_accelerations",
    "residual_features",
    "select_hyperparameters",
]
