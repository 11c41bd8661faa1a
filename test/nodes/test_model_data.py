"""nodes.model_data: the header of a serialized ModelFile read without its data, and the receiver
(a participant and a thread of its own) handing over a model's bytes without a copy, or only its
header when it is over the limit."""

from __future__ import annotations

import array
import hashlib
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import model_sender

from lifelong_learning.core.realtime import thread_names
from lifelong_learning.nodes.model_data import (
    MalformedModelMessageError,
    ModelDataReceiver,
    ModelFileHeader,
    own_participant_environment,
    parse_model_file,
)


def serialized(kind: str = "incremental_rlsc", name: str = "tuned.model", data: bytes = b"abc") -> bytes:
    from lifelong_learning.msg import ModelFile
    from rclpy.serialization import serialize_message

    msg = ModelFile(kind=kind, name=name, sha256=hashlib.sha256(data).hexdigest())
    msg.data = array.array("B", data)
    return serialize_message(msg)


@pytest.mark.parametrize(
    ("kind", "name", "data"),
    [
        ("incremental_rlsc", "tuned.model", b"abc"),
        ("k", "", b""),
        ("a" * 7, "é.model", bytes(range(256)) * 9),
    ],
)
def test_the_header_is_read_and_the_data_located_without_reading_it(built_interfaces, kind, name, data):
    raw = serialized(kind, name, data)
    header = parse_model_file(memoryview(raw))
    assert header[:3] == (kind, name, hashlib.sha256(data).hexdigest())
    assert raw[header.data_offset : header.data_offset + header.data_size] == data
    assert header.data_offset + header.data_size == len(raw)


def test_bytes_that_are_no_model_file_are_refused(built_interfaces):
    raw = bytearray(serialized(data=b"0123456789"))
    with pytest.raises(MalformedModelMessageError, match="past the message's end"):
        cut = bytes(raw[:-1])
        parse_model_file(cut)
    raw[len(raw) - 14 : len(raw) - 10] = (2**31).to_bytes(4, "little")
    with pytest.raises(MalformedModelMessageError, match="past the message's end"):
        parse_model_file(bytes(raw))
    for bad in (
        b"",
        b"\x00\x01\x00\x00",
        b"\x07\x07" + bytes(20),
        b"\x00\x01\x00\x00" + bytes(8) + b"\xff" * 4,
    ):
        with pytest.raises(MalformedModelMessageError):
            parse_model_file(bad)


def test_the_own_participant_takes_its_qos_from_this_package_profile_only(tmp_path, monkeypatch):
    from lifelong_learning.nodes.supervisor import fastdds_profile_path

    monkeypatch.delenv("RMW_IMPLEMENTATION", raising=False)
    ours = str(fastdds_profile_path())
    assert own_participant_environment(ours) == {"RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}
    other = tmp_path / "theirs.xml"
    other.write_text("<dds/>")
    assert own_participant_environment(str(other)) == {}
    assert own_participant_environment(None) == {} and own_participant_environment(str(tmp_path / "no")) == {}
    monkeypatch.setenv("RMW_IMPLEMENTATION", "rmw_cyclonedds_cpp")
    assert own_participant_environment(ours) == {}


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Whether ``predicate()`` becomes true within ``timeout`` s (the receiver's thread makes it so)."""
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


@pytest.mark.graph
def test_the_receiver_hands_over_a_view_of_the_bytes_or_only_the_header(built_interfaces):
    """A model within the limit arrives as a memoryview of the very bytes taken; one over it as its
    header only; a malformed one as an error; and the receiver stops."""
    got: list[tuple[ModelFileHeader, Any]] = []
    errors: list[tuple[str, str]] = []

    def on_message(header: ModelFileHeader, data: memoryview | None) -> None:
        got.append((header, None if data is None else (type(data), bytes(data))))

    receiver = ModelDataReceiver(
        "/test_model_data",
        "_test_model_data",
        "/",
        int(os.environ["ROS_DOMAIN_ID"]),
        depth=2,
        max_bytes=100,
        on_message=on_message,
        on_error=lambda reason, text: errors.append((reason, text)),
    )
    try:
        names = thread_names()
        assert receiver.middleware_threads and all(
            names[t].startswith("mdl.") for t in receiver.middleware_threads
        )
        with model_sender("/test_model_data") as send:
            try:
                for n, data in enumerate((b"small", bytes(101)), start=1):  # raw, as any sender's bytes
                    send(serialized(name=f"{len(data)}.model", data=data))
                    assert wait_for(lambda n=n: len(got) == n), (got, errors)
                raw = bytearray(serialized(data=b"0123456789"))
                raw[len(raw) - 14 : len(raw) - 10] = (2**31).to_bytes(4, "little")
                send(bytes(raw))
                assert wait_for(lambda: len(errors) == 1), (got, errors)
            finally:
                receiver.stop()  # before the sender leaves: its reader goes before the writer it matched
    finally:
        receiver.stop()  # when the sender did not start
    (small, view), (large, none) = got
    assert small.name == "5.model" and view == (memoryview, b"small")
    assert large.name == "101.model" and large.data_size == 101 and none is None
    assert errors[0][0] == "malformed model message" and "past the message's end" in errors[0][1]
    padded = len(raw) + -len(raw) % 4  # the middleware pads a serialized payload to 4 bytes
    assert f"({padded} bytes)" in errors[0][1]
    assert not receiver.running


@pytest.mark.graph
def test_the_receiver_goes_on_when_its_callbacks_raise(built_interfaces):
    """A model whose handling raises, and an error counter that raises too, do not end the
    receiver's thread: the next model is taken and handed over."""
    got: list[str] = []
    errors: list[str] = []

    def on_message(header: ModelFileHeader, data: memoryview | None) -> None:
        got.append(header.name)
        if len(got) == 1:
            raise RuntimeError("the load failed")

    def on_error(reason: str, text: str) -> None:
        errors.append(reason)
        raise RuntimeError("the counter failed too")

    receiver = ModelDataReceiver(
        "/test_model_data_raising",
        "_test_model_data_raising",
        "/",
        int(os.environ["ROS_DOMAIN_ID"]),
        depth=2,
        max_bytes=100,
        on_message=on_message,
        on_error=on_error,
    )
    try:
        with model_sender("/test_model_data_raising") as send:
            try:
                send(serialized(name="first.model"))
                assert wait_for(lambda: errors == ["model reload failed"]), (got, errors)
                send(serialized(name="second.model"))
                assert wait_for(lambda: len(got) == 2), (got, errors)
                assert receiver.running
            finally:
                receiver.stop()  # before the sender leaves
    finally:
        receiver.stop()  # when the sender did not start
    assert got == ["first.model", "second.model"]
    assert not receiver.running


def test_a_profiles_file_that_is_no_regular_file_is_not_waited_on(tmp_path, monkeypatch):
    import os

    monkeypatch.delenv("RMW_IMPLEMENTATION", raising=False)
    fifo = tmp_path / "profiles.xml"
    os.mkfifo(fifo)
    assert own_participant_environment(str(fifo)) == {}
    assert own_participant_environment("/dev/zero") == {}
