"""Shared fixtures of the Nyström tests."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """torch on one intra-op thread for the test: the offline methods' small matrices (tens of rows)
    gain nothing from a second thread, and on a loaded 2-core machine its hand-offs cost ~10 ms per
    product (measured: NYTRO's 200 iterations on 200 rows, 1.9 s on two threads, 0.02 s on one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
