"""Fixtures of the load-generator tests (the fake server is in support/fakes.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.fakes import REFUSED_HOST, FakeSGLang, _ServerThread

from pytest_ppsweep.measure.workload import WorkloadSpec


@pytest.fixture
def fake_server() -> Iterator[FakeSGLang]:
    """A running fake SGLang rank 0; its ``base_url`` is ``http://127.0.8.1:<port>``."""
    with _ServerThread(FakeSGLang()) as fake:
        yield fake


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A URL whose port is bound but not listening, so connections are refused (no race)."""
    with socket.socket() as sock:
        sock.bind((REFUSED_HOST, 0))
        yield f"http://{REFUSED_HOST}:{sock.getsockname()[1]}"


@pytest.fixture
def make_spec() -> Callable[..., WorkloadSpec]:
    """Small specs for fast rounds; keyword arguments override the defaults."""

    def make(**kw: Any) -> WorkloadSpec:
        base: dict[str, Any] = {"input_len": 64, "output_len": 1, "range_ratio": 1.0,
                                "num_requests": 8, "seed": 7, "vocab_size": 1000,
                                "request_timeout_s": 10.0, "round_timeout_s": 20.0}
        return WorkloadSpec(**(base | kw))

    return make
