"""The server configuration key (matrix.model.server_key): the points of microbatch.toml that
differ only in their workload share a key (and one boot); a different axis value, server
argument or environment variable makes a different key."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.matrix.model import Config, Sweep, boot_groups, server_key
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.report.dryrun import boots_line

MICROBATCH = Path(__file__).resolve().parents[2] / "test_matrix" / "microbatch.toml"


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(MICROBATCH, None)


def test_workload_alone_shares_the_key(sweep: Sweep) -> None:
    prefill, decode = sweep.config("pp8-tp4-ep4-prefill"), sweep.config("pp8-tp4-ep4-decode")
    assert server_key(prefill) == server_key(decode)
    assert server_key(prefill).split("#")[0] == "pp8-tp4-ep4"
    capped = sweep.config("pp8-tp4-ep4-mbs1-decode")
    assert server_key(capped) == server_key(sweep.config("pp8-tp4-ep4-mbs1-prefill"))
    assert server_key(capped) != server_key(decode)  # an axis value: another server
    assert server_key(sweep.config("pp4-tp8-ep4-prefill")) != server_key(prefill)  # layout


def test_server_args_and_env_make_another_key() -> None:
    base = Config(pp=8, tp=4, ep=4, server={"chunked_prefill_size": 8192}, workload="prefill")
    assert server_key(base) == server_key(replace(base, workload="decode", order=3))
    assert server_key(base) != server_key(replace(base, server={"chunked_prefill_size": 4096}))
    assert server_key(base) != server_key(replace(base, env={"NCCL_ALGO": "Ring"}))
    assert server_key(base) != server_key(replace(base, asked_ep=8))


def test_boot_groups_and_the_dry_run_count(sweep: Sweep) -> None:
    groups = boot_groups(sweep.configs)
    assert len(sweep.configs) == 8 and len(set(groups.values())) == 4
    assert groups["pp4-tp8-ep4-mbs1-decode"] == "pp4-tp8-ep4-mbs1-prefill"
    assert boots_line(sweep.configs).startswith("boots: 4 (one per server configuration; 8 ")
    one = [sweep.config("pp8-tp4-ep4-prefill"), sweep.config("pp4-tp8-ep4-prefill")]
    assert boots_line(one) == "boots: 2 (one per point)"
