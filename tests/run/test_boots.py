"""run/boots.py without processes: the points of one server configuration share one boot
(booted once, torn down once after the last expected point), a failed boot fails them all
without booting again, and another server configuration tears the previous boot down first.
The lifecycle is a recording stand-in; the run folder is real."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.model import Config, Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.measure.configrow import ConfigRow
from pytest_ppsweep.measure.phases import PhaseClock
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.boots import Boots
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.lifecycle import Lifecycle
from pytest_ppsweep.service.readiness import BootFailed

MICROBATCH = Path(__file__).resolve().parents[2] / "test_matrix" / "microbatch.toml"


class _Lifecycle:
    """What Boots asks of Lifecycle: boot, teardown, up, held, share_facts."""

    def __init__(self, sweep: Sweep, store: RunStore, fail: bool = False) -> None:
        self.sweep, self.store, self.fail = sweep, store, fail
        self.phases = PhaseClock()
        self.up: dict[str, Any] = {}
        self.calls: list[str] = []
        self.shared: list[tuple[str, str]] = []  # the per-group facts given to a joined point

    def boot(self, config: Config, boot_no: int = 1) -> Booted:
        self.calls.append(f"boot {config.id}" + (f" #{boot_no}" if boot_no > 1 else ""))
        if self.fail:
            raise BootFailed(f"{config.id}: boot failed: OOM", reason="OOM")
        ConfigRow(self.store, config.id).booted(12.0, 4)
        ConfigRow(self.store, config.id).topology(True)
        service = SimpleNamespace(config=config, dead=None)
        topology = SimpleNamespace(max_total_tokens=None)  # no KV capacity reported
        booted = Booted(cast(Any, service), self.sweep.cluster("local"), {}, cast(Any, topology))
        self.up[config.id] = booted
        return booted

    def teardown(self, booted: Booted) -> None:
        self.calls.append(f"teardown {booted.boot_id}")
        self.up.pop(booted.boot_id, None)
        ConfigRow(self.store, booted.boot_id).logs(0)

    def held(self, config_id: str, started: float) -> None:
        pass

    def share_facts(self, source: str, target: str) -> None:
        self.shared.append((source, target))


@pytest.fixture
def sweep() -> Sweep:
    return load(MICROBATCH, None)


def _boots(sweep: Sweep, tmp_path: Path, fail: bool = False) -> tuple[Boots, _Lifecycle]:
    store = RunStore(tmp_path / "reports", "r")
    life = _Lifecycle(sweep, store, fail)
    ctx = RunContext.build(sweep, [sweep.cluster("local")], store, Registry())
    return Boots(ctx, cast(Lifecycle, life)), life


def test_one_boot_for_both_workloads(sweep: Sweep, tmp_path: Path) -> None:
    boots, life = _boots(sweep, tmp_path)
    prefill, decode = sweep.config("pp8-tp4-ep4-prefill"), sweep.config("pp8-tp4-ep4-decode")
    capped = sweep.config("pp8-tp4-ep4-mbs1-prefill")
    boots.expect([prefill, decode, capped])
    assert boots.acquire(prefill).config is prefill
    boots.release(prefill)  # the decode is still expected: the boot stays up
    on = boots.acquire(decode)
    assert on.config is decode and on.boot_id == prefill.id
    boots.release(decode)
    assert life.calls == [f"boot {prefill.id}", f"teardown {prefill.id}"]
    assert life.shared == [(prefill.id, decode.id)]
    rows = boots.ctx.store.config_rows()
    assert rows[decode.id]["boot_of"] == prefill.id and rows[decode.id]["boot_s"] == ""
    assert rows[decode.id]["topology_ok"] == rows[decode.id]["log_clean"] == "True"
    boots.acquire(capped)  # another axis value: a boot of its own
    boots.close()
    assert life.calls[2:] == [f"boot {capped.id}", f"teardown {capped.id}"]


def test_another_server_configuration_tears_the_boot_down_first(
    sweep: Sweep, tmp_path: Path
) -> None:
    boots, life = _boots(sweep, tmp_path)
    prefill, other = sweep.config("pp8-tp4-ep4-prefill"), sweep.config("pp4-tp8-ep4-prefill")
    boots.expect([prefill, sweep.config("pp8-tp4-ep4-decode"), other])
    boots.acquire(prefill)
    boots.release(prefill)  # its decode was expected but never came (skipped at run time)
    boots.acquire(other)
    assert life.calls == [f"boot {prefill.id}", f"teardown {prefill.id}", f"boot {other.id}"]


def test_a_failed_boot_fails_every_workload_without_booting_again(
    sweep: Sweep, tmp_path: Path
) -> None:
    boots, life = _boots(sweep, tmp_path, fail=True)
    prefill, decode = sweep.config("pp4-tp8-ep4-prefill"), sweep.config("pp4-tp8-ep4-decode")
    boots.expect([prefill, decode])
    with pytest.raises(BootFailed):
        boots.acquire(prefill)
    boots.release(prefill)
    with pytest.raises(BootFailed, match="OOM"):
        boots.acquire(decode)
    boots.release(decode)
    assert life.calls == [f"boot {prefill.id}"]
    row = boots.ctx.store.config_rows()[decode.id]
    assert row["boot_ok"] == "False" and row["boot_of"] == prefill.id
    assert "boot of pp4-tp8-ep4-prefill (same server configuration) failed: OOM" in (
        row["boot_error"])


def test_later_boots_boot_again_and_keep_the_workloads_together(
    sweep: Sweep, tmp_path: Path
) -> None:
    """[sweep] boots = 2: the second boot of a server configuration is a new boot even right
    after the first; its workloads share it as on the first; a boot number's last point
    tears it down."""
    boots, life = _boots(sweep, tmp_path)
    prefill, decode = sweep.config("pp8-tp4-ep4-prefill"), sweep.config("pp8-tp4-ep4-decode")
    boots.expect([(prefill, 1), (decode, 1), (prefill, 2), (decode, 2)])
    assert boots.acquire(prefill, 1).boot_no == 1
    boots.release(prefill, 1)
    boots.acquire(decode, 1)
    boots.release(decode, 1)
    second = boots.acquire(prefill, 2)
    assert second.boot_no == 2
    boots.release(prefill, 2)  # its decode is still expected on boot 2
    on = boots.acquire(decode, 2)
    assert on.boot_no == 2 and on.boot_id == prefill.id
    boots.release(decode, 2)
    assert life.calls == [f"boot {prefill.id}", f"teardown {prefill.id}",
                          f"boot {prefill.id} #2", f"teardown {prefill.id}"]


def test_a_failed_boot_is_not_booted_again_for_its_later_boots(
    sweep: Sweep, tmp_path: Path
) -> None:
    """A server configuration whose first boot failed fails its later boot numbers with the
    same cause, without booting again, and keeps the first failure's reason in configs.csv."""
    boots, life = _boots(sweep, tmp_path, fail=True)
    prefill = sweep.config("pp4-tp8-ep4-prefill")
    boots.expect([(prefill, 1), (prefill, 2)])
    with pytest.raises(BootFailed):
        boots.acquire(prefill, 1)
    boots.release(prefill, 1)
    with pytest.raises(BootFailed, match="OOM"):
        boots.acquire(prefill, 2)
    boots.release(prefill, 2)
    assert life.calls == [f"boot {prefill.id}"]
    row = boots.ctx.store.config_rows().get(prefill.id, {})
    assert "(same server configuration)" not in row.get("boot_error", "")


def test_a_layouts_boots_add_up_in_its_configs_row(sweep: Sweep, tmp_path: Path) -> None:
    """[sweep] boots: the log scan is clean only when every boot's logs were (a clean second
    boot does not hide the first one's fatal line), and the memory facts are the most loaded
    GPU over the boots, not the last boot's."""
    from pytest_ppsweep.cluster.gpus import GpuMemory
    from pytest_ppsweep.service.logscan import Finding

    store = RunStore(tmp_path / "reports", "r")
    life = Lifecycle(RunContext.build(sweep, [sweep.cluster("local")], store, Registry()))
    cid = "pp8-tp4-ep4-prefill"
    life.record_logs(cid, [Finding("oom", "node0.log", 7, "CUDA out of memory")])
    life.record_memory(cid, [GpuMemory("n0", 0, "gpu", 80_000, 81_000)])
    life.record_logs(cid, [])  # the second boot's logs are clean
    life.record_memory(cid, [GpuMemory("n1", 3, "gpu", 79_000, 81_000)])
    row = store.config_rows()[cid]
    assert (row["log_clean"], row["log_findings"]) == ("False", "1")
    assert (row["mem_peak_mib"], row["mem_worst_node"], row["mem_headroom_mib"]) == (
        "80000", "n0", "1000")
