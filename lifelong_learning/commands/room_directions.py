"""``lifelong-learning room-directions``: learn the room's directions from bags, for the
feature_extractor's ``room_directions`` (:mod:`lifelong_learning.vision.room_directions`).

The bags' labelled features (every LabeledFeatures topic, or ``--topic``) are grouped by label, and
each label's frames, in the order they were recorded, into sessions: a new session begins after a
gap of more than ``--session-gap-s`` between two frames of the label. Labels seen in two sessions or
more (an object taught in one room and shown again in another) give the moves; their ``--directions``
leading directions (as many as the moves span, if fewer) are written, atomically, to ``--out``.
Learn them from features recorded with ``room_directions`` empty: features already projected give
directions of what was left.
"""

from __future__ import annotations

import argparse
import sys

HELP = "learn the room directions (for feature_extractor's room_directions) from bags of labelled features"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``room-directions``."""
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
    parser.add_argument("--topic", default=None, help="one LabeledFeatures topic (default: every one)")


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
    from lifelong_learning.vision.room_directions import RoomDirections

    if not args.session_gap_s > 0 or args.directions < 1:
        print(
            "--session-gap-s must be > 0 and --directions >= 1, "
            f"got {args.session_gap_s} and {args.directions}",
            file=sys.stderr,
        )
        return 2
    try:
        data = read_labeled_features(args.bags, topic=args.topic)
    except (OSError, ValueError) as error:
        print(f"cannot read the bags: {error}", file=sys.stderr)
        return 2
    sessions = sessions_of(data.labels, data.stamps, args.session_gap_s)
    try:
        room = RoomDirections.fit(data.X, data.labels, sessions, args.directions, fewer=True)
    except ValueError as error:
        print(f"no room directions: {error}", file=sys.stderr)
        return 2
    room.save(args.out)
    skipped = sum(data.skipped.values())
    print(
        f"{room.directions.shape[0]} room directions of {room.dim}-d features, from {room.sessions} sessions "
        f"of {room.labels} labels ({len(data.labels)} labelled frames read, {skipped} messages skipped): "
        f"{args.out}"
    )
    return 0
