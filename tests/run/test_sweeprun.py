"""What the orchestration around a layout's boot and rounds does, and that it does it at once:
every node started (ranks >= 1) and stopped concurrently, GPU snapshots of a loopback cluster in
one nvidia-smi call, a snapshot reused when nothing ran since, the warm-up once per boot, and
every layout's phases timed (metadata/phases.json).

No server boots here: the launchers are stand-ins whose start/stop meet at a barrier (a
sequential start or stop breaks it and fails the test), nvidia-smi is the emulator's real shim
or a counting shell script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from support.matrices import CONFIGS, SMALL_HEAD

from pytest_ppsweep.cluster.gpus import SmiParseError, split_nodes
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.measure.phases import PHASES, PhaseClock, totals, warmup_span
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.sweeprun import SweepRun
from pytest_ppsweep.service.launch import Service

NET = "127.0.45"  # this file's loopback range (nothing listens: no server boots here)
BARRIER_S = 10.0  # a sequential start/stop waits this long at the barrier, then fails


def sweep_with(tmp_path: Path, nvidia_smi: str) -> Sweep:
    hosts = ", ".join(f'"{NET}.{i}"' for i in range(1, 5))
    text = SMALL_HEAD.format(configs=CONFIGS) + f"""
[clusters.local]
kind = "local"
hosts = [{hosts}]
gpus_per_node = 8
server_module = "pytest_ppsweep.sim"
port = 43510
dist_init_port = 43610
nvidia_smi = {nvidia_smi}
env = {{ PPSWEEP_SIM_STATE_DIR = "{tmp_path / 'sim-state'}" }}
"""
    path = tmp_path / "ppsweep.toml"
    path.write_text(text)
    return load(path)


SHIM = '["{python}", "-m", "pytest_ppsweep.sim.smi", "--host", "{hosts}"]'


# -- ranks started and stopped at once ---------------------------------------------------------


class MeetingRank:
    """A rank whose stop waits until every rank of the service is being stopped."""

    def __init__(self, stops: threading.Barrier) -> None:
        self.stops = stops
        self.stopped = False

    def poll(self) -> int | None:
        return 0 if self.stopped else None

    def stop(self, grace_s: float = 5.0) -> int | None:
        if not self.stopped:
            self.stops.wait()  # BrokenBarrierError after BARRIER_S when stops run one by one
            self.stopped = True
        return 0


class MeetingLauncher:
    """Ranks >= 1 wait at a barrier until all of them are being started."""

    def __init__(self, nodes: int) -> None:
        self.starts = threading.Barrier(nodes - 1, timeout=BARRIER_S)
        self.stops = threading.Barrier(nodes, timeout=BARRIER_S)
        self.order: list[int] = []

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> MeetingRank:
        self.order.append(spec.node_rank)
        if spec.node_rank > 0:
            assert self.order[0] == 0, "rank 0 (the rendezvous) must start first"
            self.starts.wait()
        return MeetingRank(self.stops)


def test_every_rank_after_rank_0_starts_at_once_and_every_rank_stops_at_once(
    tmp_path: Path,
) -> None:
    sweep = sweep_with(tmp_path, "[]")
    launcher = MeetingLauncher(4)
    registry = Registry()
    service = Service(sweep, sweep.cluster("local"), sweep.configs[0], tmp_path / "logs",
                      launcher=launcher, registry=registry)
    service.start()
    assert launcher.order[0] == 0 and sorted(launcher.order) == [0, 1, 2, 3]
    assert registry.live == 4
    ranks = cast(list[MeetingRank], service.procs)
    spans = [service.start_spans[r] for r in (1, 2, 3)]
    assert max(b for b, _e in spans) < min(e for _b, e in spans)  # all in flight together
    service.stop()
    assert all(r.stopped for r in ranks) and registry.live == 0
    stops = list(service.stop_spans.values())
    assert len(stops) == 4 and max(b for b, _e in stops) < min(e for _b, e in stops)


def test_a_rank_that_fails_to_stop_does_not_keep_the_others_running(tmp_path: Path) -> None:
    sweep = sweep_with(tmp_path, "[]")
    registry = Registry()
    service = Service(sweep, sweep.cluster("local"), sweep.configs[0], tmp_path / "logs",
                      launcher=MeetingLauncher(4), registry=registry)
    service.start()
    stuck = cast(list[MeetingRank], service.procs)[1]

    def refuse(grace_s: float = 5.0) -> int | None:
        stuck.stops.wait()
        raise RuntimeError("node1: survived SIGKILL")

    stuck.stop = refuse  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="node1: survived SIGKILL"):
        service.stop()
    others = [p for i, p in enumerate(cast(list[MeetingRank], service.procs)) if i != 1]
    assert all(r.stopped for r in others)
    assert registry.live == 1  # the stuck one stays tracked: the registry's close tries again


def test_the_registry_stops_what_is_left_at_once() -> None:
    stops = threading.Barrier(3, timeout=BARRIER_S)
    ranks = [MeetingRank(stops) for _ in range(3)]
    registry = Registry()
    for rank in ranks:
        registry.track(rank)
    registry.stop_ranks()
    assert all(r.stopped for r in ranks) and registry.live == 0


# -- GPU snapshots ------------------------------------------------------------------------------


def test_the_shim_answers_for_several_nodes_in_one_call(tmp_path: Path) -> None:
    query = ["--query-gpu=index,name,memory.used,memory.total", "--format=csv,noheader,nounits"]
    hosts = [f"{NET}.1", f"{NET}.2"]
    env = {"PPSWEEP_SIM_STATE_DIR": str(tmp_path)}

    def shim(host: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest_ppsweep.sim.smi", "--host", host,
                               *query], capture_output=True, text=True, check=True,
                              env={**os.environ, **env})
        return done.stdout

    together = split_nodes(shim(",".join(hosts)), hosts)
    assert together == {h: shim(h) for h in hosts}  # each node's part as it alone prints it
    assert len(together[hosts[0]].splitlines()) == 8


def test_split_nodes_names_what_is_missing() -> None:
    text = "==> a <==\n0, 1, 2\n==> b <==\n0, 3, 4\n"
    assert split_nodes(text, ["a", "b"]) == {"a": "0, 1, 2\n", "b": "0, 3, 4\n"}
    with pytest.raises(SmiParseError, match="no '==> <address> <==' part for c"):
        split_nodes(text, ["a", "b", "c"])
    with pytest.raises(SmiParseError, match="output before the first node: 'oops'"):
        split_nodes("oops\n" + text, ["a"])


def counting_smi(count: Path) -> str:
    script = (f"echo call >> {count}; for h in $(echo {{hosts}} | tr , ' '); do "
              "echo \"==> $h <==\"; echo '0, GPU, 100, 1000'; done")
    return json.dumps(["sh", "-c", script])


def test_a_loopback_cluster_is_snapshotted_in_one_call_and_reused_when_nothing_ran(
    tmp_path: Path,
) -> None:
    count = tmp_path / "calls"
    sweep = sweep_with(tmp_path, counting_smi(count))
    cluster = sweep.cluster("local")
    run = SweepRun(sweep, [cluster], RunStore(tmp_path / "reports", "r"))
    calls = lambda: len(count.read_text().splitlines()) if count.exists() else 0  # noqa: E731

    first = run.snapshot_gpus(cluster, "pp4-tp8-ep4", "before")
    assert calls() == 1 and [g.node for g in first] == [h.name for h in cluster.hosts]
    run.snapshot_gpus(cluster, "pp4-tp8-ep4", "healthy")
    assert calls() == 2  # a healthy snapshot is never a reused one
    run.snapshot_gpus(cluster, "pp4-tp8-ep4", "after")  # test_gpu_memory
    again = run.snapshot_gpus(cluster, "pp4-tp8-ep4", "after")  # the plugin's teardown
    assert calls() == 3 and again == first
    run.snapshot_gpus(cluster, "pp4-tp8-ep4", "cleaned")
    run.snapshot_gpus(cluster, "pp8-tp4-ep4", "before")  # the next layout, right after
    assert calls() == 4
    store = run.store
    assert store.gpu_path("pp8-tp4-ep4", "before").read_text() == store.gpu_path(
        "pp4-tp8-ep4", "cleaned").read_text()
    # a round (or a boot, a stop) in between: asked again
    run.context.snapshots.changed(cluster)
    run.snapshot_gpus(cluster, "pp8-tp4-ep4", "after")
    run.snapshot_gpus(cluster, "pp8-tp4-ep4", "cleaned")
    assert calls() == 6
    # "after" of another layout, or an old snapshot, is not reused
    run.snapshot_gpus(cluster, "pp4-tp8-ep4", "after")
    assert calls() == 7
    latest = run.context.snapshots._latest
    latest[cluster.name] = (*latest[cluster.name][:3], time.monotonic() - 3600)
    run.snapshot_gpus(cluster, "pp4-tp8-ep4", "after")
    assert calls() == 8
    assert run.context.phases.row("pp4-tp8-ep4")["snapshots"] > 0


def test_a_snapshot_aside_gives_its_gpus_or_its_error_where_it_is_waited_for(
    tmp_path: Path,
) -> None:
    """The healthy snapshot runs in a thread alongside the server info (run.lifecycle's boot waits
    for it before the boot ends): the same GPUs and files, and a failing nvidia-smi raises there."""
    from pytest_ppsweep.cluster.base import HostError

    count = tmp_path / "calls"
    sweep = sweep_with(tmp_path, counting_smi(count))
    cluster = sweep.cluster("local")
    run = SweepRun(sweep, [cluster], RunStore(tmp_path / "reports", "r"))
    aside = run.context.snapshots.aside(cluster, "pp4-tp8-ep4", "healthy").result(timeout=60)
    assert [g.node for g in aside] == [h.name for h in cluster.hosts]
    assert run.store.gpu_path("pp4-tp8-ep4", "healthy").read_text().count("GPU") == 4
    failing = sweep_with(tmp_path, '["sh", "-c", "echo no GPU >&2; exit 3"]').cluster("local")
    future = run.context.snapshots.aside(failing, "pp8-tp4-ep4", "healthy")
    with pytest.raises(HostError, match="nvidia-smi exited 3: no GPU"):
        future.result(timeout=60)


def test_the_real_shim_in_one_call_gives_every_node_its_gpus(tmp_path: Path) -> None:
    sweep = sweep_with(tmp_path, SHIM)
    cluster = sweep.cluster("local")
    run = SweepRun(sweep, [cluster], RunStore(tmp_path / "reports", "r"))
    gpus = run.snapshot_gpus(cluster, "pp4-tp8-ep4", "before")
    assert [(g.node, g.index) for g in gpus] == [
        (h.name, i) for h in cluster.hosts for i in range(8)
    ]
    assert all(g.total_mib > g.used_mib >= 0 for g in gpus)


def test_the_shim_reads_a_busy_node_from_its_state_alone(tmp_path: Path) -> None:
    """A node whose rank publishes its state is shown from the state file without the profile
    (the shim's start is then a fifth shorter); an idle node's GPUs come from the profile."""
    from pytest_ppsweep.sim.launch.gpustate import GpuStatePublisher, GpuUse, gpu_facts
    from pytest_ppsweep.sim.model.profile import load_profile

    busy, idle = f"{NET}.1", f"{NET}.2"
    facts = {**gpu_facts(load_profile("tiny").gpu), "gpu_name": "From The State"}
    GpuStatePublisher(tmp_path, busy, 4242, facts).publish([GpuUse(0, 1234), GpuUse(1, 5678)])
    code = ("import sys; from pathlib import Path; from pytest_ppsweep.sim import smi; "
            f"gpus = smi.node_gpus({busy!r}, Path({str(tmp_path)!r}), 'no-such-profile'); "
            "print([(g.name, g.used_mib, g.pid) for g in gpus]); "
            "print('pytest_ppsweep.sim.model.profile' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.splitlines() == [
        "[('From The State', 1234, 4242), ('From The State', 5678, 4242)]", "False"]
    from pytest_ppsweep.sim import smi

    gpus = smi.node_gpus(idle, tmp_path, "tiny")
    tiny = load_profile("tiny").gpu
    assert [(g.name, g.used_mib, g.pid) for g in gpus] == [
        (tiny.name, tiny.idle_used_mib, None)] * tiny.gpus_per_node
    assert gpus[0].uuid.startswith("GPU-") and gpus[0].uuid != gpus[1].uuid


def test_an_exited_ranks_node_reads_idle_from_its_facts_for_the_same_profile_only(
    tmp_path: Path,
) -> None:
    """When a rank exits it leaves its node's facts (no pid, no use): the shim shows the node
    idle from them without reading the profile, but only when asked for the profile that rank
    ran; asked for another, it reads that profile (the facts are the other profile's)."""
    from pytest_ppsweep.sim.launch.gpustate import GpuStatePublisher, GpuUse, gpu_facts
    from pytest_ppsweep.sim.model.profile import load_profile

    host = f"{NET}.3"
    tiny = load_profile("tiny").gpu
    pub = GpuStatePublisher(tmp_path, host, 4243, {"profile": "tiny", **gpu_facts(tiny)})
    pub.publish([GpuUse(0, 4321)])
    pub.release()
    code = ("import sys; from pathlib import Path; from pytest_ppsweep.sim import smi; "
            f"gpus = smi.node_gpus({host!r}, Path({str(tmp_path)!r}), 'tiny'); "
            "print([(g.used_mib, g.pid) for g in gpus]); "
            "print('pytest_ppsweep.sim.model.profile' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.splitlines() == [
        str([(tiny.idle_used_mib, None)] * tiny.gpus_per_node), "False"]
    from pytest_ppsweep.sim import smi

    kimi = load_profile("kimi-k3-6000d").gpu
    other = smi.node_gpus(host, tmp_path, "kimi-k3-6000d")
    assert [(g.name, g.total_mib, g.pid) for g in other] == [
        (kimi.name, kimi.memory_total_mib, None)] * kimi.gpus_per_node


def test_node_info_and_preflight_ask_the_shim_with_the_clusters_emulator_env(
    tmp_path: Path,
) -> None:
    """One command line for nvidia-smi (nodeinfo.smi_command): node info and the preflight's
    GPU check pass the cluster's PPSWEEP_SIM_* to the shim, so it reads that profile and state
    (here "tiny": 2 GPUs a node, not the default profile's 8)."""
    from pytest_ppsweep.cluster import nodeinfo, preflight
    from pytest_ppsweep.sim.launch.gpustate import GpuStatePublisher, GpuUse, gpu_facts
    from pytest_ppsweep.sim.model.profile import load_profile

    sweep = sweep_with(tmp_path, SHIM)
    plain = sweep.cluster("local")
    cluster = replace(plain, env={**plain.env, "PPSWEEP_SIM_PROFILE": "tiny"})
    host = cluster.hosts[0]
    (node,) = nodeinfo.metadata(sweep, cluster)["nodes"]
    assert [g["index"] for g in node["gpus"]] == [0, 1], node
    facts = gpu_facts(load_profile("tiny").gpu)
    GpuStatePublisher(tmp_path / "sim-state", host.address, 4242, facts).publish([GpuUse(0, 99)])
    registry = Registry()
    try:
        problems = preflight.check_gpus(cluster, host, registry)
    finally:
        registry.close()
    assert problems == ["GPUs are not idle: 1 compute process(es): pid 4242 python3 on 1 GPU(s)"]


# -- warm-up once per boot; phases -------------------------------------------------------------


def test_only_the_first_round_of_a_boot_is_warmed_up(tmp_path: Path) -> None:
    sweep = sweep_with(tmp_path, "[]")
    run = SweepRun(sweep, [sweep.cluster("local")], RunStore(tmp_path / "reports", "r"))
    boot = lambda token, workload="": cast(  # noqa: E731
        Booted, SimpleNamespace(service=SimpleNamespace(boot_token=token),
                                config=SimpleNamespace(workload=workload))
    )
    first, rebooted = boot("a"), boot("b")
    warm_up = run.rounds.warm_up
    assert [warm_up(first), warm_up(first), warm_up(rebooted)] == [True, False, True]
    # a second workload on the same boot (one boot per server configuration) warms up once
    assert [warm_up(boot("a", "decode")), warm_up(boot("a", "decode"))] == [True, False]


def test_the_prompts_are_made_while_the_first_layout_boots(tmp_path: Path) -> None:
    sweep = sweep_with(tmp_path, "[]")
    run = SweepRun(sweep, [sweep.cluster("local")], RunStore(tmp_path / "reports", "r"))
    config = sweep.configs[0]
    run.context.workloads.prepare(config)
    for thread in [t for t in threading.enumerate() if t.name.startswith("ppsweep-prompts-")]:
        thread.join(timeout=60)
    spec, prompts = run.workload_for(config)
    # made once, by the thread
    assert prompts is run.context.workloads._prompts and prompts.bodies(spec, None)
    assert (True, spec.api, spec.output_len, None) in prompts._bodies  # the warm-up's too
    run.context.workloads.prepare(config)  # the next layout: nothing to make
    assert not [t for t in threading.enumerate() if t.name.startswith("ppsweep-prompts-")]


def test_the_phase_clock_adds_up_and_rejects_unknown_phases() -> None:
    clock = PhaseClock()
    clock.add("pp1", "round", 1.5)
    clock.add("pp1", "round", 0.5)
    with clock.timed("pp1", "teardown"):
        pass
    row = clock.row("pp1")
    assert row["round"] == 2.0 and row["teardown"] >= 0 and row["end"] >= row["start"]
    with pytest.raises(ValueError, match="unknown phase 'nap'"):
        clock.add("pp1", "nap", 1.0)
    assert totals({"pp1": row, "pp2": {"round": 1.0}})["round"] == 3.0
    assert set(totals({})) == set(PHASES)
    records: list[dict[str, Any]] = [{"send_ts": 10.0, "e2e_raw_s": 2.0},
                                     {"send_ts": 11.0, "e2e_raw_s": 2.5}, {"send_ts": None}]
    assert warmup_span(records) == 3.5 and warmup_span([]) == 0.0


def test_a_log_unchanged_since_its_last_scan_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log scan after a layout's tests follows test_logs_clean's: an unchanged rank log is
    not scanned twice; a line added since is found."""
    from pytest_ppsweep.service.logscan import LogScanner

    log = tmp_path / "node0.log"
    log.write_text("starting\nTraceback (most recent call last):\n")
    scanner = LogScanner()
    scans: list[str] = []
    real_scan = scanner.scan
    monkeypatch.setattr(scanner, "scan", lambda lines, source, first_line_no=1: (
        scans.append(source), real_scan(lines, source, first_line_no))[1])
    first = scanner.scan_file(log)
    assert [(f.kind, f.line_no) for f in first] == [("traceback", 2)]
    assert scanner.scan_file(log) == first and len(scans) == 1
    with log.open("a") as fh:
        fh.write("torch.OutOfMemoryError: CUDA out of memory\n")
    assert [f.kind for f in scanner.scan_file(log)] == ["traceback", "cuda-oom"]
    assert len(scans) == 2
