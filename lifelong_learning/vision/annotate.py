"""What the robot sees, as a picture: a camera frame with the crop's box and the recognizer's answer
(no ROS imports).

The feature_extractor node draws it for ``rqt_image_view`` or Foxglove when ``annotate`` is on and
someone subscribes (:func:`annotated`): the box the crop cut (green; none for the whole frame), and
above it the showing's answer with its confidence, or ``?`` while the object is unknown (the robot
asks what it is). The cost is measured in docs/benchmarks/recognition-showing.md.
"""

from __future__ import annotations

import cv2
import numpy as np

from lifelong_learning.vision.crop import Box

#: colours (RGB): a known answer, an unknown one
KNOWN, UNKNOWN = (40, 220, 40), (255, 160, 0)


def caption(label: str, confidence: float) -> str:
    """The text drawn: ``label 87%``, or ``?`` for an unknown answer (``label`` ``""``)."""
    return f"{label} {100.0 * confidence:.0f}%" if label else "?"


def annotated(picture: np.ndarray, box: Box | None, label: str | None, confidence: float = 0.0) -> np.ndarray:
    """A copy of the uint8 RGB ``picture`` with ``box`` and the answer drawn (``label`` None: no answer
    yet, nothing written; ``""``: unknown, ``?``)."""
    out = np.ascontiguousarray(picture, dtype=np.uint8).copy()
    height, width = out.shape[:2]
    colour = UNKNOWN if label == "" else KNOWN
    x, y = 0, 0
    if box is not None:
        x, y = int(box.x), int(box.y)
        cv2.rectangle(out, (x, y), (x + int(box.width) - 1, y + int(box.height) - 1), colour, 2)
    if label is not None:
        scale = max(0.4, min(height, width) / 480.0)
        text = caption(label, confidence)
        (w, h), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        top = max(0, y - h - base - 4)
        cv2.rectangle(out, (x, top), (min(width - 1, x + w + 4), top + h + base + 4), colour, -1)
        cv2.putText(
            out, text, (x + 2, top + h + 2), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 1, cv2.LINE_AA
        )
    return out
