"""What the serving core tells its node: the outcome of a request, and the events to log or count.

The core neither logs nor counts by itself: it reports through a :class:`Reporter` (a learner node
passes its logger and its counted rejections; :class:`LogReporter` serves plain Python), so that
it needs no ROS. The rejection reasons it counts are the constants below, the names the node's
diagnostics show (``rejected: <reason>``).
"""

from __future__ import annotations

import logging
from typing import NamedTuple, Protocol

#: a model file that could not be loaded (or stored, or kept): the serving model is unchanged
RELOAD_FAILED = "model reload failed"
#: a path that a request or an announcement names, refused (outside ``model_directory``, not ours)
PATH_REFUSED = "path refused"
#: a model received as bytes over the size limit
TOO_LARGE = "model too large"
#: a model received as bytes whose SHA-256 is not the one its message states
CHECKSUM_MISMATCH = "model checksum mismatch"
#: serialized bytes on the model data topic that are no ModelFile (a length past the end)
MALFORMED_MODEL_MESSAGE = "malformed model message"


class Outcome(NamedTuple):
    """The answer to a request (reload, rollback, reset, a received model): done or not, and why."""

    ok: bool
    message: str


class RefusedError(Exception):
    """A request refused before anything changed; ``str(exc)`` is the answer's message."""


class Reporter(Protocol):
    """Where the serving core's log lines and counted rejections go."""

    def info(self, message: str) -> None:
        """Something done (a model loaded, a checkpoint restored)."""

    def warning(self, message: str) -> None:
        """Something the operator should look at (a parameter conflict, a file left behind)."""

    def error(self, message: str) -> None:
        """A failure (a reload, a checkpoint write); the serving model is unchanged."""

    def reject(self, reason: str, detail: str, warn: bool = True) -> None:
        """Count one rejected input of ``reason`` (``warn``: the reporter may warn, rate-limited)."""


class LogReporter:
    """A :class:`Reporter` on a :mod:`logging` logger that counts rejections per reason."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger(__name__)
        self.rejections: dict[str, int] = {}

    def info(self, message: str) -> None:
        self.logger.info(message)

    def warning(self, message: str) -> None:
        self.logger.warning(message)

    def error(self, message: str) -> None:
        self.logger.error(message)

    def reject(self, reason: str, detail: str, warn: bool = True) -> None:
        self.rejections[reason] = self.rejections.get(reason, 0) + 1
        if warn:
            self.logger.warning(f"rejected input [{reason}]: {detail}")
