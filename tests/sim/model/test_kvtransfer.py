"""The P/D KV transfer model (sim/model/kvtransfer.py) and its timeouts' settings."""

from __future__ import annotations

import pytest

from pytest_ppsweep.sim.launch.settings import load_settings
from pytest_ppsweep.sim.model.kvtransfer import TransferLink, kv_bytes_per_token, transfer_s
from pytest_ppsweep.sim.model.profile import load_profile


def test_kv_bytes_and_transfer_time_follow_the_profile() -> None:
    kimi = load_profile("kimi-k3-6000d")
    assert kv_bytes_per_token(kimi) == 1152 * 61  # MLA latent x layers
    # 16K tokens over the seeds' 39.9 GB/s inter-node busbw (§9.2) plus the P2P latency
    expected = 25e-6 + 16384 * 1152 * 61 / 39.9e9
    assert transfer_s(kimi, 16384, "mooncake") == pytest.approx(expected)
    assert 0.025 < expected < 0.035
    assert transfer_s(kimi, 16384, "nixl") == transfer_s(kimi, 16384, "mooncake")


def test_fake_backend_and_empty_prompt_move_nothing() -> None:
    tiny = load_profile("tiny")
    assert transfer_s(tiny, 4096, "fake") == 0.0
    assert transfer_s(tiny, 0, "mooncake") == 0.0


def test_link_serves_transfers_in_turn() -> None:
    link = TransferLink()
    assert link.book(1.0, 0.5) == 1.5
    assert link.book(1.2, 0.5) == 2.0  # waits for the first
    assert link.book(5.0, 0.5) == 5.5  # idle link: starts at once


def test_timeouts_read_sglangs_variables() -> None:
    s = load_settings({})
    assert (s.kv_bootstrap_timeout_s, s.kv_waiting_timeout_s) == (300.0, 300.0)
    s = load_settings({"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "600",
                       "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "30"})
    assert (s.kv_bootstrap_timeout_s, s.kv_waiting_timeout_s) == (30.0, 600.0)
    with pytest.raises(ValueError, match="WAITING_TIMEOUT"):
        load_settings({"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "0"})
