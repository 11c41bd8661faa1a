"""BlockWorker: what callbacks queue is learned in blocks on another thread (no ROS needed)."""

import threading
import time

import pytest

from lifelong_learning.nodes.block_worker import BlockWorker


def test_items_queued_while_a_block_is_handled_form_the_next_block_in_order() -> None:
    blocks: list[list[int]] = []
    gate = threading.Event()

    def handle(block: list[int]) -> None:
        blocks.append(block)
        gate.wait(5)  # the first block holds the thread while more items queue up

    worker = BlockWorker("test", handle, capacity=100, on_error=pytest.fail)
    assert worker.put(0)
    deadline = time.monotonic() + 5
    while not blocks and time.monotonic() < deadline:
        time.sleep(0.001)
    for i in range(1, 6):
        assert worker.put(i)
    gate.set()
    assert worker.wait_idle(5)
    assert blocks == [[0], [1, 2, 3, 4, 5]]
    assert (worker.blocks, worker.items, worker.largest_block) == (2, 6, 5)
    assert worker.stop(5)


def test_a_full_queue_refuses_and_stop_learns_what_is_queued_first() -> None:
    seen: list[int] = []
    gate = threading.Event()
    worker = BlockWorker("test", lambda b: (gate.wait(5), seen.extend(b)), capacity=3, on_error=pytest.fail)
    worker.put(0)
    time.sleep(0.05)  # 0 is being handled: the queue is empty again
    assert [worker.put(i) for i in (1, 2, 3, 4)] == [True, True, True, False]
    assert worker.waiting == 3
    gate.set()
    assert worker.stop(5)
    assert seen == [0, 1, 2, 3]  # everything queued before stop was handled
    assert not worker.put(5)  # stopped: refused


def test_a_failing_block_is_reported_and_the_next_one_is_handled() -> None:
    errors: list[BaseException] = []
    seen: list[int] = []

    def handle(block: list[int]) -> None:
        if 0 in block:
            raise RuntimeError("bad block")
        seen.extend(block)

    worker = BlockWorker("test", handle, capacity=10, on_error=errors.append)
    worker.put(0)
    assert worker.wait_idle(5)
    worker.put(1)
    assert worker.wait_idle(5) and worker.stop(5)
    assert [str(e) for e in errors] == ["bad block"] and seen == [1]


def test_min_interval_gathers_what_arrives_meanwhile() -> None:
    blocks: list[list[int]] = []
    worker = BlockWorker("test", blocks.append, capacity=1000, on_error=pytest.fail, min_interval=0.2)
    worker.put(0)
    time.sleep(0.05)
    for i in range(1, 11):
        worker.put(i)
        time.sleep(0.005)
    assert worker.wait_idle(5) and worker.stop(5)
    assert blocks[0] == [0] and [i for b in blocks[1:] for i in b] == list(range(1, 11)) and len(blocks) == 2
