"""Model files received as bytes (``model_data_topic``), taken off the executor and sized first.

A ``lifelong_learning/ModelFile`` message carries a whole model file, up to hundreds of MB. Taken
the way rclpy takes a message, on the node's executor, it would be deserialized and converted to
Python with the GIL held (four copies of its bytes, seconds for 600 MiB) before the node could
look at its size, and the node's inputs would wait meanwhile. :class:`ModelDataReceiver` takes
these messages instead:

- on a participant of its own (an rclpy context, with a hidden node), so that its fragments are
  reassembled by other middleware threads than the node's inputs, in the background (normal
  policy, nice 10: :func:`~lifelong_learning.core.realtime.make_background`); with this package's Fast DDS
  profile in effect, its reader frees a message's memory once it is taken (``DYNAMIC`` history
  memory, :func:`own_participant_environment`) instead of keeping the largest message ever
  received in its pool;
- by a thread of its own, as the serialized (CDR) bytes, with the GIL released while the middleware
  copies them out (:class:`RawTake`, ``rcl_take_serialized_message`` through ctypes);
- then its header (kind, name, SHA-256) and the length of its data are read from the CDR bytes
  (:func:`parse_model_file`): a model over the size limit is refused and its bytes freed at once,
  before anything is copied, kept or written; one within it is handed over as a memoryview of those
  bytes (no copy), which stays valid as long as a reference to it does.

Why, and what was measured: ``docs/serving.md`` (Models as bytes) and
``docs/benchmarks/large-model.md``.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from lifelong_learning.core.files import UnsafePathError, open_regular
from lifelong_learning.core.realtime import MIDDLEWARE_THREAD_PREFIXES, make_background, thread_names
from lifelong_learning.serving.report import MALFORMED_MODEL_MESSAGE, RELOAD_FAILED

#: seconds between two looks for a message (a model is rare; a take costs microseconds)
POLL_PERIOD_S = 0.05
#: seconds between two checks that the receiver's threads run in the background (the node's
#: real-time setup, made after the receiver started, gives every middleware thread its priority)
BACKGROUND_CHECK_S = 1.0
#: the name prefix of the receiver's middleware threads (Fast DDS names them ``dds.*``)
THREAD_PREFIX = "mdl."
#: rcl's return codes used here (rcl/types.h)
_RCL_RET_OK = 0
_RCL_RET_SUBSCRIPTION_TAKE_FAILED = 401
#: the environment variable that makes rmw_fastrtps take the QoS of a participant's endpoints from
#: the XML profiles (read when the participant is created)
QOS_FROM_XML = "RMW_FASTRTPS_USE_QOS_FROM_XML"
#: the Fast DDS profiles file that this package ships (it declares the memory policies the own
#: participant needs: :func:`own_participant_environment`)
PROFILE_MARKER = "lifelong_learning_model_data"
#: the largest profiles file looked into
MAX_PROFILES_BYTES = 1024**2


class ModelFileHeader(NamedTuple):
    """What a serialized ``lifelong_learning/ModelFile`` says before its data."""

    kind: str
    name: str
    sha256: str
    data_offset: int  # where the data's bytes start in the serialized message
    data_size: int  # how many there are (the sequence's length prefix)


class MalformedModelMessageError(ValueError):
    """Serialized bytes that are no ``lifelong_learning/ModelFile`` (cut short, a length past the end)."""


def parse_model_file(raw: memoryview | bytes, max_text: int = 4096) -> ModelFileHeader:
    """Read the header of a serialized (CDR) ``lifelong_learning/ModelFile``: stamp, kind, name,
    sha256, and the data's offset and length, without touching the data.

    Raises:
        MalformedModelMessageError: not such a message (unknown encapsulation, a string longer than
            ``max_text`` or past the end, a data length past the end).
    """
    size = len(raw)
    if size < 4 + 8:
        raise MalformedModelMessageError(f"{size} bytes: shorter than a ModelFile's header")
    head = bytes(raw[:4])
    if head[0] != 0 or head[1] not in (0, 1):
        raise MalformedModelMessageError(f"unknown CDR encapsulation {head[:2].hex()}")
    endian = "<" if head[1] == 1 else ">"
    pos = 4 + 8  # encapsulation, then builtin_interfaces/Time (two 4-byte fields)

    def length_at(at: int) -> tuple[int, int]:
        at = 4 + ((at - 4 + 3) & ~3)  # 4-byte alignment, counted from the end of the encapsulation
        if at + 4 > size:
            raise MalformedModelMessageError("cut short before a length")
        return struct.unpack_from(endian + "I", raw, at)[0], at + 4

    texts = []
    for field in ("kind", "name", "sha256"):
        n, pos = length_at(pos)
        if n > max_text or pos + n > size:
            raise MalformedModelMessageError(f"the {field} field's length {n} is out of bounds")
        texts.append(bytes(raw[pos : pos + n]).rstrip(b"\0").decode("utf-8", errors="replace"))
        pos += n
    n, pos = length_at(pos)
    if pos + n > size:
        raise MalformedModelMessageError(
            f"the data's length {n} is past the message's end ({size - pos} left)"
        )
    return ModelFileHeader(texts[0], texts[1], texts[2], pos, n)


# ---------------------------------------------------------------------------- the take, GIL released
class _Allocator(ctypes.Structure):
    _fields_ = [
        ("allocate", ctypes.c_void_p),
        ("deallocate", ctypes.c_void_p),
        ("reallocate", ctypes.c_void_p),
        ("zero_allocate", ctypes.c_void_p),
        ("state", ctypes.c_void_p),
    ]


class _Uint8Array(ctypes.Structure):
    """``rcutils_uint8_array_t`` (= ``rcl_serialized_message_t``)."""

    _fields_ = [
        ("buffer", ctypes.c_void_p),
        ("buffer_length", ctypes.c_size_t),
        ("buffer_capacity", ctypes.c_size_t),
        ("allocator", _Allocator),
    ]


class _Libraries:
    """rcl's and rcutils' functions that :class:`RawTake` calls (loaded once, already in the process)."""

    def __init__(self) -> None:
        rcl, rcutils = ctypes.CDLL("librcl.so"), ctypes.CDLL("librcutils.so")
        self.take = rcl.rcl_take_serialized_message
        self.take.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Uint8Array), ctypes.c_void_p, ctypes.c_void_p]
        self.take.restype = ctypes.c_int
        self.default_allocator = rcutils.rcutils_get_default_allocator
        self.default_allocator.restype = _Allocator
        self.init = rcutils.rcutils_uint8_array_init
        self.init.argtypes = [ctypes.POINTER(_Uint8Array), ctypes.c_size_t, ctypes.POINTER(_Allocator)]
        self.init.restype = ctypes.c_int
        self.fini = rcutils.rcutils_uint8_array_fini
        self.fini.argtypes = [ctypes.POINTER(_Uint8Array)]
        self.fini.restype = ctypes.c_int
        self.reset_error = rcutils.rcutils_reset_error
        self.reset_error.restype = None


_LIBRARIES: _Libraries | None = None
_LIBRARIES_LOCK = threading.Lock()


def _libraries() -> _Libraries:
    global _LIBRARIES
    with _LIBRARIES_LOCK:
        if _LIBRARIES is None:
            _LIBRARIES = _Libraries()
        return _LIBRARIES


class SerializedMessage:
    """The bytes of one message taken serialized, in memory rcutils allocated (freed by :meth:`free`,
    or when the last view of :meth:`view` is gone)."""

    def __init__(self) -> None:
        self._lib = _libraries()
        self._array = _Uint8Array()
        allocator = self._lib.default_allocator()
        if self._lib.init(ctypes.byref(self._array), 0, ctypes.byref(allocator)) != 0:
            self._lib.reset_error()
            raise MemoryError("rcutils_uint8_array_init failed")
        self._lock = threading.Lock()
        self._freed = False

    def __len__(self) -> int:
        return int(self._array.buffer_length)

    def view(self) -> memoryview:
        """The bytes, without a copy; they stay allocated while this view (or one made from it) lives."""
        n = len(self)
        if self._freed or n == 0:
            return memoryview(b"")
        window = (ctypes.c_ubyte * n).from_address(self._array.buffer)
        window.owner = self  # type: ignore[attr-defined]  # the memory lives as long as the window
        return memoryview(window).cast("B")

    def free(self) -> None:
        """Give the bytes back now (no view may be in use)."""
        with self._lock:
            if not self._freed:
                self._freed = True
                self._lib.fini(ctypes.byref(self._array))

    def __del__(self) -> None:
        self.free()


class RawTake:
    """Takes the messages of an rclpy subscription as serialized bytes with the GIL released (rclpy's
    own ``take_message`` holds it while the middleware copies the bytes: a whole model file)."""

    def __init__(self, subscription: Any) -> None:
        self.subscription = subscription
        self._lib = _libraries()

    def __call__(self) -> SerializedMessage | None:
        """The next message, or None when none is waiting.

        Raises:
            MemoryError: the bytes could not be allocated (the message is lost).
            RuntimeError: rcl failed otherwise (its return code).
        """
        message = SerializedMessage()
        info = ctypes.create_string_buffer(256)  # rmw_message_info_t (72 bytes), unread
        handle = self.subscription.handle
        with handle:  # not destroyed meanwhile
            ret = self._lib.take(handle.pointer, ctypes.byref(message._array), info, None)
        if ret == _RCL_RET_OK:
            return message
        self._lib.reset_error()
        message.free()
        if ret == _RCL_RET_SUBSCRIPTION_TAKE_FAILED:
            return None
        if ret == 10:  # RCL_RET_BAD_ALLOC
            raise MemoryError("no memory for a message on the model topic (it is lost)")
        raise RuntimeError(f"rcl_take_serialized_message failed ({ret})")


# ---------------------------------------------------------------------------- the receiver
def own_participant_environment(profiles_file: str | None) -> dict[str, str]:
    """The environment the receiver's own participant is created in: ``QOS_FROM_XML=1`` when the
    Fast DDS profiles in effect (``profiles_file``) are this package's, which declare ``DYNAMIC``
    history memory for the readers of such participants (freed once taken) and the builtin memory
    policies rmw_fastrtps would otherwise set; nothing otherwise (another file, another RMW): the
    reader's pool then keeps the largest message until the receiver stops."""
    rmw = os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if rmw != "rmw_fastrtps_cpp" or not profiles_file:
        return {}
    try:
        with open_regular(profiles_file, MAX_PROFILES_BYTES) as f:  # never a FIFO, never unbounded
            if PROFILE_MARKER.encode() not in f.read(MAX_PROFILES_BYTES):
                return {}
    except (OSError, UnsafePathError):
        return {}
    return {QOS_FROM_XML: "1"}


_ENVIRONMENT_LOCK = threading.Lock()


def rename_threads(tids: list[int], prefix: str) -> None:
    """Give threads ``tids`` of this process ``prefix`` in place of the first component of their
    names (``dds.udp.7413`` → ``mdl.udp.7413``); a thread that ended is skipped."""
    for tid in tids:
        comm = Path(f"/proc/self/task/{tid}/comm")
        try:
            name = comm.read_text().strip()
            comm.write_text((prefix + name.partition(".")[2])[:15])
        except OSError:
            continue


@contextmanager
def _environment(values: dict[str, str]):  # type: ignore[no-untyped-def]
    """``values`` set in this process's environment for the block (the middleware reads them when a
    participant is created), then restored."""
    with _ENVIRONMENT_LOCK:
        before = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class ModelDataReceiver:
    """Takes ``lifelong_learning/ModelFile`` messages on ``topic`` (an absolute, resolved name) on a
    participant and a thread of its own, and hands each to ``on_message(header, data)``: ``data`` a
    memoryview of its bytes when ``header.data_size`` is at most ``max_bytes``, else None (the bytes
    are freed before the call). ``on_error(reason, text)`` hears what could not be taken or read
    (``"malformed model message"``, ``"model reload failed"``).

    ``on_message`` runs on the receiver's thread: whatever it does (hash, write, load) keeps the
    node's executor free. :meth:`stop` ends the thread (after the message in hand) and the participant.
    """

    def __init__(
        self,
        topic: str,
        name: str,
        namespace: str,
        domain_id: int,
        depth: int,
        max_bytes: int,
        on_message: Callable[[ModelFileHeader, memoryview | None], None],
        on_error: Callable[[str, str], None],
    ) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        from lifelong_learning.msg import ModelFile

        self.max_bytes = int(max_bytes)
        self.on_message, self.on_error = on_message, on_error
        self.environment = own_participant_environment(os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE"))
        self.context = Context()
        before = set(thread_names())
        rclpy.init(args=[], context=self.context, domain_id=domain_id, signal_handler_options=None)
        try:
            with _environment(self.environment):  # read when the participant is created: with the node
                self.node = rclpy.create_node(
                    name,
                    namespace=namespace,
                    context=self.context,
                    start_parameter_services=False,
                    enable_rosout=False,
                )
            qos = QoSProfile(
                depth=depth,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            )
            # raw: rclpy's executor never takes it (the node is in none); RawTake does
            self.subscription = self.node.create_subscription(ModelFile, topic, lambda _: None, qos, raw=True)
        except BaseException:
            rclpy.try_shutdown(context=self.context)
            raise
        self.take = RawTake(self.subscription)
        #: the middleware's threads of this participant (they reassemble its messages), renamed
        #: ``mdl.*`` from ``dds.*``: not the node's answering path (``realtime_priority`` leaves them
        #: alone), and told apart in ``top -H``
        self.middleware_threads = [
            tid
            for tid, n in thread_names().items()
            if tid not in before and n.startswith(MIDDLEWARE_THREAD_PREFIXES)
        ]
        rename_threads(self.middleware_threads, THREAD_PREFIX)
        self._stop = threading.Event()
        self._destroyed = False
        self._thread = threading.Thread(target=self._run, name="model-data", daemon=True)
        self._thread.start()

    @property
    def topic(self) -> str:
        """The topic's resolved name."""
        return self.subscription.topic_name

    @property
    def running(self) -> bool:
        """Whether the receiver's thread still takes messages."""
        return self._thread.is_alive()

    def background(self) -> None:
        """This receiver's thread and its participant's middleware threads at the normal policy and a
        background nice (:func:`~lifelong_learning.core.realtime.make_background`): they may have
        inherited a real-time policy from the executor's thread, or been given it with the node's
        middleware threads (``realtime_priority``), and copying a model file must not delay an answer."""
        make_background([threading.get_native_id(), *self.middleware_threads])

    def _run(self) -> None:
        last = -1e18
        while not self._stop.is_set():
            try:
                if time.monotonic() - last > BACKGROUND_CHECK_S:
                    last = time.monotonic()
                    self.background()
                message = self.take()
                if message is not None:
                    self._hand_over(message)
                    del message  # its bytes go now, not when the next message is taken
                    continue
            except Exception as exc:  # the thread must go on taking models, whatever failed
                self._report(RELOAD_FAILED, f"a message on {self.topic} could not be taken: {exc!r}")
            self._stop.wait(POLL_PERIOD_S)

    def _report(self, reason: str, text: str) -> None:
        """``on_error``, which must not end the thread either (it is the node's counter)."""
        try:
            self.on_error(reason, text)
        except Exception:  # nothing left to tell it with; the next message is taken all the same
            pass

    def _hand_over(self, message: SerializedMessage) -> None:
        """``message`` parsed, and handed to ``on_message``: its data as a view of its bytes, or, over
        the limit, none (the bytes freed first). Malformed: freed, ``on_error``."""
        size = len(message)
        view = message.view()
        try:
            header = parse_model_file(view)
        except MalformedModelMessageError as exc:
            view.release()
            message.free()
            self._report(
                MALFORMED_MODEL_MESSAGE, f"a message on {self.topic} is no ModelFile ({size} bytes): {exc}"
            )
            return
        if header.data_size > self.max_bytes:
            view.release()
            message.free()  # before anything else: nothing of it is kept
            data = None
        else:
            data = view[header.data_offset : header.data_offset + header.data_size]
            view.release()
        del message  # within the limit: freed with the last view of its bytes
        try:
            self.on_message(header, data)
        except Exception as exc:  # the thread must go on taking models
            self._report(RELOAD_FAILED, f"model {header.name!r} received on {self.topic} failed: {exc!r}")

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread (it finishes the message in hand, up to ``timeout`` s) and the participant;
        once stopped, a call does nothing."""
        import rclpy

        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():  # a load still runs: the participant goes with the process
            return
        if self._destroyed:  # stopped before
            return
        self._destroyed = True
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
