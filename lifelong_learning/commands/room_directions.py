"""``lifelong-learning room-directions``: learn the room's directions from bags, for the
feature_extractor's ``room_directions`` (:mod:`lifelong_learning.vision.room_directions`).

The bags' labelled features (``--topic``, the teacher's ``/labeled_features``) are grouped by label,
and each label's frames, in the order they were recorded, into sessions: a new session begins after
a gap of more than ``--session-gap-s`` between two frames of the label; sessions of fewer than
``--min-session-frames`` frames are left out. Labels seen in two sessions or
more (an object taught in one room and shown again in another) give the moves; their ``--directions``
leading directions (as many as the moves span, if fewer) are written, atomically, to ``--out``.
Learn them from features recorded with ``room_directions`` empty: features already projected give
directions of what was left. The bags do not say which network made their features, nor how they were
normalised: ``--network`` and ``--feature-normalisation`` say it (the feature_extractor's defaults
unless given), the file records them, and a feature_extractor with another ``backbone`` (or
``model_path``) or ``feature_normalisation`` refuses the file at start.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

HELP = "learn the room directions (for feature_extractor's room_directions) from bags of labelled features"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``room-directions``."""
    from lifelong_learning.io.bags import LABELED_FEATURES_TOPIC
    from lifelong_learning.vision.backbones import DEFAULT_MODEL
    from lifelong_learning.vision.normalisation import DEFAULT_NORMALISATION, NORMALISATIONS

    parser.add_argument("bags", nargs="+", help="bag directories or files with LabeledFeatures")
    parser.add_argument("--out", required=True, help="the .npz file to write")
    parser.add_argument(
        "--directions",
        type=int,
        default=10,
        help="directions to learn, or as many as the bags' moves span if fewer (default 10)",
    )
    parser.add_argument(
        "--session-gap-s",
        type=float,
        default=5.0,
        help="a label's frames further apart than this (receive time) begin another session (default 5)",
    )
    parser.add_argument(
        "--min-session-frames",
        type=int,
        default=3,
        help="sessions of fewer frames (a stray frame after a gap) are left out (default 3)",
    )
    parser.add_argument(
        "--network",
        default=DEFAULT_MODEL,
        help="the feature_extractor's backbone (or its model_path: an .onnx, .pt, .ts or .pth file) when "
        f"the bags were recorded (default {DEFAULT_MODEL}): recorded in the file",
    )
    parser.add_argument(
        "--feature-normalisation",
        default=DEFAULT_NORMALISATION,
        choices=NORMALISATIONS,
        help=f"the feature_extractor's feature_normalisation when the bags were recorded (default "
        f"{DEFAULT_NORMALISATION}): recorded in the file",
    )

    parser.add_argument(
        "--topic",
        default=LABELED_FEATURES_TOPIC,
        help=f"the LabeledFeatures topic (default {LABELED_FEATURES_TOPIC}; under a namespace, e.g. "
        "/robot1/labeled_features; learned_features also carries the pasted copies, the frame's object "
        "on other rooms, which would blur the sessions)",
    )


def sessions_of(labels: list[str], stamps_ns: object, gap_s: float) -> list[tuple[str, int]]:
    """Each row's session ``(label, k)``: the ``k``-th run of the label's rows, in stamp order, with no
    gap of more than ``gap_s`` between consecutive rows."""
    import numpy as np

    stamps = np.asarray(stamps_ns, dtype=np.int64)
    out: list[tuple[str, int]] = [("", 0)] * len(labels)
    last: dict[str, tuple[int, int]] = {}  # label -> (its last stamp, its session)
    for i in np.argsort(stamps, kind="stable"):
        label, stamp = labels[i], int(stamps[i])
        previous = last.get(label)
        if previous is None:
            session = 0
        else:
            session = previous[1] + (stamp - previous[0] > gap_s * 1e9)
        last[label] = (stamp, session)
        out[i] = (label, session)
    return out


def run(args: argparse.Namespace) -> int:
    """Read the bags, learn the directions, write them; 2 with a message when it cannot."""
    from lifelong_learning.io.labeled_features import read_labeled_features
    from lifelong_learning.vision.backbones import BACKBONES, is_network
    from lifelong_learning.vision.room_directions import RoomDirections

    if not is_network(args.network):
        print(
            f"--network must be one of {', '.join(BACKBONES)} or a model file (.onnx, .pt, .ts, .pth), "
            f"got {args.network!r}",
            file=sys.stderr,
        )
        return 2
    if not args.session_gap_s > 0 or args.directions < 1 or args.min_session_frames < 1:
        print(
            "--session-gap-s must be > 0, --directions and --min-session-frames >= 1, "
            f"got {args.session_gap_s}, {args.directions} and {args.min_session_frames}",
            file=sys.stderr,
        )
        return 2
    try:
        data = read_labeled_features(args.bags, topic=args.topic)
    except (OSError, ValueError) as error:
        print(f"cannot read the bags: {error}", file=sys.stderr)
        return 2
    sessions = sessions_of(data.labels, data.stamps, args.session_gap_s)
    sizes = Counter(sessions)
    keep = [i for i, session in enumerate(sessions) if sizes[session] >= args.min_session_frames]
    try:
        room = RoomDirections.fit(
            data.X[keep],
            [data.labels[i] for i in keep],
            [sessions[i] for i in keep],
            args.directions,
            fewer=True,
        )
    except ValueError as error:
        print(f"no room directions: {error}", file=sys.stderr)
        return 2
    room = room.in_space(args.network, args.feature_normalisation)
    try:
        room.save(args.out)
    except OSError as error:
        print(f"cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return 2
    n, skipped = room.directions.shape[0], sum(data.skipped.values())
    print(
        f"{n} room direction{'' if n == 1 else 's'} of {room.dim}-d features "
        f"({100 * room.explained:.0f} % of the moves), from {room.sessions} sessions of {room.labels} "
        f"labels ({len(data.labels)} labelled frames read, {skipped} messages skipped), for "
        f"{room.network} features normalised {room.normalisation}: {args.out}"
    )
    return 0
