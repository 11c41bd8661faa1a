"""The package's message definitions, embedded so that :mod:`lifelong_learning.io.bags`
can register them with rosbags when the package is installed with ``pip install .`` (which
ships no ``msg/`` directory). ``test/io/test_interfaces.py`` checks they equal ``msg/*.msg``.
"""

from __future__ import annotations

PACKAGE = "lifelong_learning"

#: message name → the exact text of ``msg/<name>.msg``
MESSAGE_DEFINITIONS: dict[str, str] = {
    "BagFileClosed": (
        "# A storage file the bag_recorder closed: it is in the bag's metadata.yaml, readable by\n"
        "# rosbags, and never written again. Published on bag_recorder's ~/file_closed (reliable,\n"
        "# transient local, the last 100 kept) for whoever retrains from recent data: the\n"
        "# nystrom_tuner's lifelong loop (docs/lifelong-loop.md). The fields rosbag2's recorder puts in\n"
        "# its events/write_split message (rosbag2_interfaces/msg/WriteSplitEvent: closed_file,\n"
        "# opened_file, node_name), plus what a reader needs to pick files without opening them.\n"
        "std_msgs/Header header                 # stamp: when the file was closed (the recorder's clock)\n"
        "string closed_file                     # the closed storage file (absolute path, .mcap or .db3)\n"
        'string opened_file                     # the file opened next ("": opened with the next message)\n'
        "string node_name                       # the recorder's fully qualified name\n"
        "string bag                             # the bag directory the file belongs to (absolute path)\n"
        "builtin_interfaces/Time first_message  # receive time of its first message\n"
        "builtin_interfaces/Time last_message   # receive time of its last message\n"
        "uint64 message_count                   # messages in the file\n"
        "string[] topics                        # the topics with at least one message in the file\n"
    ),
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
        'string label            # the answer: top_label, or "" (unknown) when never taught '
        "(novelty > the node's novelty_threshold), confidence < its unknown_threshold, or no class "
        "is known\n"
        'string top_label        # the highest-scoring class, also when label is "" ("" while the '
        "model knows no class)\n"
        "float32 confidence      # calibrated probability that top_label is right, in [0, 1] "
        "(temperature-scaled softmax of the scores, fitted on held-out samples)\n"
        "string[] labels         # every known class, in the model's order\n"
        "float32[] scores        # raw decision value of each class in `labels`\n"
        "float32 novelty         # novelty score (higher: more likely never taught; the node's "
        "novelty_score)\n"
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
    "LearningMetrics": (
        "# How a learner node does on its live stream: the prequential error (each sample predicted\n"
        "# before it was learned) over the last window_s seconds, and the batch objective of everything\n"
        "# it learned, published on ~/learning_metrics every metrics_period_s (docs/metrics.md). Errors\n"
        "# are never negative: -1 marks an error the window cannot define (no sample of a class, targets\n"
        "# that did not vary), and `undefined` says why.\n"
        "std_msgs/Header header          # stamp: when the window ends (the node's clock)\n"
        "uint64 model_version            # the serving model's version (bumped on every swap)\n"
        "uint64 samples_learned          # samples the serving model has learned\n"
        "float64 window_s                # the window's length [s]\n"
        "uint64 window_samples           # samples scored in the window\n"
        "string[] names                  # inverse_dynamics: the joints; object_recognition: the classes\n"
        "float64[] prequential_error     # per name: torque nMSE (dynamics), error rate (recognition)\n"
        "float64 mean_prequential_error  # the mean of the defined prequential_error entries (-1: none)\n"
        "float64[] baseline_error        # per name: the URDF's rigid-body model alone (dynamics; or empty)\n"
        "float64 mean_baseline_error     # the mean of the defined baseline_error entries (-1: none)\n"
        "float64 forgetting              # the forgetting factor that serves (dynamics; 1 = none; else 0)\n"
        'string undefined                # why an error is -1 ("name: reason; ..."); "" when none is\n'
        "float64[] batch_objective       # per name: the serving model's batch objective over all it\n"
        "                                # learned, min_w lambda |w|^2 + sum_t (w'z_t - u_t)^2 (= its\n"
        "                                # online errors, each divided by 1 + its leverage: Zhdanov-\n"
        "                                # Kalnishkan), over its targets' spread: an nMSE of the model\n"
        "                                # fitted on all of it at once (recognition: of each class's 0/1\n"
        "                                # indicator; dynamics: of the residual's target); -1: undefined\n"
        "float64 mean_batch_objective    # the mean of the defined batch_objective entries, or the one\n"
        "                                # figure of a model that has one for every name (-1: none)\n"
    ),
    "ShowingAnswer": (
        "# The recognizer's answer for one showing: the frames of one object held up to the "
        "camera, grouped\n"
        "# by the object_recognition node (ended when the object leaves, the scene or the "
        "teacher's label\n"
        "# changes), their evidence accumulated. Published on `showing` as frames arrive.\n"
        "std_msgs/Header header  # of the showing's latest frame\n"
        "uint64 showing_id       # the showing (increasing; names it in ~/answer)\n"
        'string label            # the answer: the best class, or "" (unknown: never taught, or '
        "not sure)\n"
        'string top_label        # the best class, also when label is "" ("" while no class is '
        "known)\n"
        "float32 confidence      # accumulated calibrated probability of top_label, in [0, 1]\n"
        "float32 novelty         # mean novelty score of the frames (higher: more likely never "
        "taught)\n"
        "uint32 frames           # frames behind the answer (the showing's last max_showing_frames "
        "at most)\n"
        'string taught_label     # the label the showing was taught with ("" when none)\n'
    ),
    "Query": (
        '# The robot asks "what is this?": a showing stayed unknown, or its best two classes '
        "stayed close.\n"
        "# Published on the object_recognition node's ~/query, at most once per showing and "
        "rate-limited;\n"
        "# answer it on teacher_label (while the object is still shown) or by ~/answer naming "
        "showing_id.\n"
        "std_msgs/Header header  # of the showing's latest frame\n"
        "uint64 showing_id       # the showing asked about\n"
        'string reason           # "unknown" (novel or unsure) or "ambiguous" (best two classes '
        "close)\n"
        "string[] guesses        # the best classes, best first (empty while no class is known)\n"
        "float32[] confidences   # their accumulated probabilities\n"
        "float32 novelty         # the showing's novelty score\n"
        "uint32 frames           # frames of the showing kept (what an answer will teach)\n"
    ),
}


def ros_type_names() -> dict[str, str]:
    """``"lifelong_learning/msg/<Name>"`` → definition text, as rosbags' ``get_types_from_msg`` wants."""
    return {f"{PACKAGE}/msg/{name}": text for name, text in MESSAGE_DEFINITIONS.items()}
