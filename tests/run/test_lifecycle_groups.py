"""A layout's teardown keeps its log scan and GPU memory per server group: a layout of several
groups gets ``metadata/<layout>.groups.json`` (each group's fatal lines and worst rank at each
moment, read back typed), configs.csv the whole layout's (fatal lines added up, the worst rank
over the groups); a layout of one serve group keeps its run folder as it was.

No server boots: the launcher is a stand-in, the rank logs are written by the test, and
nvidia-smi is replaced by a table of what each node's GPUs use."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_ppsweep.cluster.gpus import GpuMemory
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import RunStore, csv_rows
from pytest_ppsweep.matrix.deployment import Deployment, Router, ServerGroup
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.measure import snapshots
from pytest_ppsweep.measure.gpu import WorstRank
from pytest_ppsweep.measure.groupfacts import GroupFacts, GroupLogScan, LayoutFacts
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.lifecycle import Lifecycle
from pytest_ppsweep.service.launch import Service

SEED = Path(__file__).resolve().parents[2] / "test_matrix" / "ppsweep.toml"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
TRACEBACK = "Traceback (most recent call last):"
TOTAL = 81_559
# configs.csv's columns (a layout of several groups adds none)
COLUMNS = ["config_id", "pp", "tp", "ep", "order", "boot_ok", "boot_s", "boot_error",
           "topology_ok", "pp_max_micro_batch_size", "log_clean", "log_findings", "mem_peak_mib",
           "mem_total_mib", "mem_headroom_mib", "mem_worst_node", "mem_worst_gpu", "cluster",
           "held_s", "boot_of", "kv_tokens", "kv_requests"]


@pytest.fixture(scope="module")
def sweep() -> Sweep:
    return load(SEED, None)


def _pd() -> Config:
    return Config(2, 8, 8, tags=("pd",), deployed=Deployment(
        (ServerGroup("prefill", 2, 8, 8, nodes=2, label="prefill"),
         ServerGroup("decode", 1, 16, 16, nodes=2, label="decode")),
        router=Router(port=30100)))


class _Rank:
    def __init__(self) -> None:
        self.stopped = False

    def poll(self) -> int | None:
        return 0 if self.stopped else None

    def stop(self, grace_s: float = 5.0) -> int | None:
        self.stopped = True
        return 0


class _Launcher:
    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> _Rank:
        return _Rank()


class _Router:
    name = "router"

    def start(self) -> None:
        pass

    def wait_ready(self, timeout_s: float) -> float:
        return 0.0

    def stop(self) -> None:
        pass


def _used(node: int, gpu: int) -> int:
    """MiB used on GPU ``gpu`` of the cluster's node ``node``: the last node's GPU 0 most."""
    return 10_000 + 1_000 * node - 500 * gpu


@pytest.fixture
def smi(sweep: Sweep, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi answers from :func:`_used` for the nodes it is asked (two GPUs each)."""
    index = {h.name: i for i, h in enumerate(sweep.cluster(None).hosts)}

    def query_gpus(cluster: Cluster, registry: Registry) -> list[GpuMemory]:
        return [GpuMemory(h.name, g, "H100", _used(index[h.name], g), TOTAL)
                for h in cluster.hosts for g in (0, 1)]

    monkeypatch.setattr(snapshots, "query_gpus", query_gpus)


def _teardown(sweep: Sweep, tmp_path: Path, config: Config,
              logs: Mapping[str, str]) -> tuple[RunStore, Lifecycle]:
    """``config`` started with stand-in ranks, ``logs`` written (file name → text), then torn
    down by the lifecycle (log scan, the "after" snapshot, stop, the "cleaned" snapshot)."""
    cluster = sweep.cluster(None)
    store = RunStore(tmp_path / "reports", "r")
    ctx = RunContext.build(sweep, [cluster], store, Registry())
    life = Lifecycle(ctx)
    life.place(config, cluster)
    service = Service(sweep, cluster, config, store.service_dir(config.id),
                      launcher=cast(Any, _Launcher()), registry=ctx.registry,
                      router=_Router() if config.deployment.router else None)
    service.start()
    for name, text in logs.items():
        (store.service_dir(config.id) / name).write_text(text)
    booted = Booted(service, cluster, {}, cast(Any, None))
    life.up[config.id] = booted
    life.teardown(booted)
    return store, life


def _worst(sweep: Sweep, node: int) -> WorstRank:
    return WorstRank(sweep.cluster(None).hosts[node].name, 0, _used(node, 0), TOTAL)


@pytest.mark.usefixtures("smi")
def test_a_two_group_layouts_facts_are_written_per_group_and_read_back(
        sweep: Sweep, tmp_path: Path) -> None:
    config = _pd()
    store, _life = _teardown(sweep, tmp_path, config, {
        "prefill-node0.log": f"{TRACEBACK}\n", "decode-node1.log": f"ready\n{OOM}\n{OOM}\n"})
    hosts = [h.name for h in sweep.cluster(None).hosts]
    line = f"decode-node1.log:{{}}: [cuda-oom] {OOM}"
    assert LayoutFacts.read(store, config.id) == LayoutFacts(config.id, (
        GroupFacts("prefill", "prefill", "pp2-tp8-ep8", tuple(hosts[:2]),
                   GroupLogScan(1, (f"prefill-node0.log:1: [traceback] {TRACEBACK}",)),
                   {"after": _worst(sweep, 1), "cleaned": _worst(sweep, 1)}),
        GroupFacts("decode", "decode", "pp1-tp16-ep16", tuple(hosts[2:]),
                   GroupLogScan(2, (line.format(2), line.format(3))),
                   {"after": _worst(sweep, 3), "cleaned": _worst(sweep, 3)}),
    ))
    # configs.csv: the whole layout's, by the one rule (fatal lines added up, the worst rank
    # over the groups), in the columns it always had
    text = store.configs_csv.read_text()
    assert text.splitlines()[0].split(",") == COLUMNS
    [row] = csv_rows(text)
    assert (row["log_clean"], row["log_findings"]) == ("False", "3")
    assert (row["mem_peak_mib"], row["mem_worst_node"], row["mem_worst_gpu"],
            row["mem_headroom_mib"]) == (str(_used(3, 0)), hosts[3], "0",
                                         str(TOTAL - _used(3, 0)))
    # each group's snapshot under its label, as before
    assert sorted(p.name for p in store.gpu_dir(config.id).iterdir()) == [
        "decode-after.csv", "decode-cleaned.csv", "prefill-after.csv", "prefill-cleaned.csv"]


@pytest.mark.usefixtures("smi")
def test_a_single_group_layouts_run_folder_is_unchanged(sweep: Sweep, tmp_path: Path) -> None:
    config = next(c for c in sweep.configs if c.id == "pp4-tp8-ep4")
    store, _life = _teardown(sweep, tmp_path, config, {"node2.log": f"{OOM}\n"})
    assert not list(store.dir.rglob("*.groups.json"))  # no new file
    assert LayoutFacts.read(store, config.id) is None
    text = store.configs_csv.read_text()
    assert text.splitlines()[0].split(",") == COLUMNS
    [row] = csv_rows(text)
    hosts = [h.name for h in sweep.cluster(None).hosts]
    assert (row["log_clean"], row["log_findings"]) == ("False", "1")
    assert (row["mem_peak_mib"], row["mem_worst_node"]) == (str(_used(3, 0)), hosts[3])
    assert sorted(p.name for p in store.gpu_dir(config.id).iterdir()) == [
        "after.csv", "cleaned.csv"]


@pytest.mark.usefixtures("smi")
def test_a_point_on_the_same_boot_gets_the_boots_per_group_facts(
        sweep: Sweep, tmp_path: Path) -> None:
    """A point measured on another point's boot (run/boots.py) gets its per-group facts under
    its own name."""
    config = _pd()
    store, life = _teardown(sweep, tmp_path, config, {"decode-node0.log": f"{OOM}\n"})
    life.share_facts(config.id, "pd-other-workload")
    shared = LayoutFacts.read(store, "pd-other-workload")
    own = LayoutFacts.read(store, config.id)
    assert shared is not None and own is not None
    assert shared.groups == own.groups and shared.config_id == "pd-other-workload"
    assert shared.fatal_lines() == 1
