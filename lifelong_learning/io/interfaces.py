"""The package's message definitions, embedded so that :mod:`lifelong_learning.io.bags`
can register them with rosbags when the package is installed with ``pip install .`` (which
ships no ``msg/`` directory). ``test/io/test_interfaces.py`` checks they equal ``msg/*.msg``.
"""

from __future__ import annotations

PACKAGE = "lifelong_learning"

#: message name → the exact text of ``msg/<name>.msg``
MESSAGE_DEFINITIONS: dict[str, str] = {
    "Features": (
        "# A feature vector describing one observation (e.g. CNN features of one camera image).\n"
        "std_msgs/Header header  # stamp and frame_id of the source observation (the image)\n"
        "float32[] data          # the feature vector\n"
    ),
    "LabeledFeatures": (
        "# A Features message with a teacher's annotation: a training sample for a classifier.\n"
        "# The fields of Features are repeated (not nested) so that tools which expect a top-level\n"
        "# `header` (message_filters, bag tooling) work on it too.\n"
        "std_msgs/Header header  # stamp and frame_id of the source observation\n"
        "float32[] data          # the feature vector\n"
        "string label            # what the teacher says the observation shows; must not be empty\n"
    ),
    "Prediction": (
        "# A classifier's answer for one feature vector.\n"
        "std_msgs/Header header  # copied from the Features message it answers\n"
        'string label            # the answer: top_label, or "" (unknown) when confidence < the node\'s '
        "unknown_threshold or no class is known\n"
        'string top_label        # the highest-scoring class, also when label is "" ("" while the model '
        "knows no class)\n"
        "float32 confidence      # calibrated probability that top_label is right, in [0, 1] "
        "(temperature-scaled softmax of the scores, fitted on held-out samples)\n"
        "string[] labels         # every known class, in the model's order\n"
        "float32[] scores        # raw decision value of each class in `labels`\n"
    ),
    "ModelFile": (
        "# A model file carried over ROS, for a learner node on a machine that does not share the\n"
        "# writer's filesystem (a tuner on a GPU server). Published latched on the learners'\n"
        "# `model_data_topic` (default tuned_model_data); a node takes files of its own kind only,\n"
        "# verifies sha256 and the model's compatibility (joints, kinematics, feature size) before it\n"
        "# swaps, and keeps the model it replaced for ~/rollback.\n"
        "builtin_interfaces/Time stamp  # when the writer made the file\n"
        "string kind                    # the model kind in the file's header (incremental_rlsc, ...)\n"
        "string name                    # the writer's file name (kept under the node's model_directory)\n"
        "string sha256                  # hex SHA-256 of data\n"
        "uint8[] data                   # the model file's bytes\n"
    ),
}


def ros_type_names() -> dict[str, str]:
    """``"lifelong_learning/msg/<Name>"`` → definition text, as rosbags' ``get_types_from_msg`` wants."""
    return {f"{PACKAGE}/msg/{name}": text for name, text in MESSAGE_DEFINITIONS.items()}
