"""Preflight (every problem of every node, at once), node metadata, and leftovers found by
label and removed, on the real namespace hosts."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.remote import IMAGE, TestHosts, cluster_toml, containers, rank_processes, small_matrix

from pytest_ppsweep.cluster import nodeinfo, preflight, reap
from pytest_ppsweep.cluster.docker_launcher import DockerLauncher
from pytest_ppsweep.cluster.labels import RUN_LABEL, rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.ssh_launcher import SshProcessLauncher
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep
from pytest_ppsweep.matrix.parse import load


def sweep_for(test_hosts: TestHosts, work: dict[str, Path], launcher: str, **kw: object) -> Sweep:
    path = work["model"].parent / f"{launcher}.toml"
    text = small_matrix("ns", work["model"], work["devices"]) + cluster_toml(
        test_hosts, name="ns", launcher=launcher, state=work["state"], scale=1000, **kw
    )
    path.write_text(text)
    return load(path, image=IMAGE)


@pytest.mark.parametrize("launcher", ["docker", "process"])
def test_ready_nodes_pass(test_hosts: TestHosts, work: dict[str, Path], launcher: str) -> None:
    sweep = sweep_for(test_hosts, work, launcher)
    assert preflight.check(sweep, sweep.cluster("ns")) == []


def test_every_problem_of_every_node_in_one_failure(
    test_hosts: TestHosts, work: dict[str, Path]
) -> None:
    sweep = sweep_for(test_hosts, work, "docker")
    cluster = sweep.cluster("ns")
    # h603's GPUs are busy: the emulator's shim reads the state a rank publishes
    (work["state"] / "10.200.0.103.json").write_text(
        json.dumps({"pid": 4242, "gpus": [{"index": 0, "used_mib": 70000}]})
    )
    # a fifth node that does not answer
    cluster = replace(cluster, hosts=(*cluster.hosts, Host(address="10.200.0.199", name="h699")))
    bad = replace(
        sweep,
        image="local/not-here:1",
        model_path=str(work["model"].parent / "no-model"),
        devices=(f"{work['devices']}:/dev/infiniband", "/dev/no-such-device"),
    )
    problems = preflight.check(bad, cluster)
    text = "\n".join(problems)
    for name, address in test_hosts.hosts:
        where = f"{name} ({address}): "
        assert f"{where}image local/not-here:1 is not present" in text
        assert f"{where}model path {work['model'].parent / 'no-model'} does not exist" in text
        assert f"{where}device /dev/no-such-device does not exist" in text
    assert (
        "h603 (10.200.0.103): GPUs are not idle: 1 compute process(es): pid 4242 python3 on "
        "1 GPU(s)"
    ) in text
    assert sum("GPUs are not idle" in p for p in problems) == 1
    h699 = [p for p in problems if p.startswith("h699")]
    assert len(h699) == 1, problems  # unreachable: nothing else is asked
    assert h699[0].startswith("h699 (10.200.0.199): SSH connection as root for docker failed: ")
    assert h699[0].endswith(("no answer within 10 s", "(No route to host)")), h699
    message = preflight.message(cluster, problems)
    assert message.startswith(
        f"preflight of cluster 'ns' found {len(problems)} problem(s) on 5 of 5 node(s); "
        "nothing was started:"
    )


def test_a_port_in_use_is_found(test_hosts: TestHosts, work: dict[str, Path]) -> None:
    sweep = sweep_for(test_hosts, work, "process", port=30500)
    cluster = sweep.cluster("ns")
    listener = RankSpec(
        1,
        "h602",
        "10.200.0.102",
        (sys.executable, "-m", "http.server", "--bind", "10.200.0.102", "30500"),
        {},
    )
    launcher = SshProcessLauncher({"10.200.0.102": _ssh(cluster, 1)})
    rank = launcher.start(listener, work["state"] / "listener.log", {RUN_LABEL: "port-test"})
    try:
        import time

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not preflight._port_open("10.200.0.102", 30500):
            time.sleep(0.1)
        problems = preflight.check(sweep, cluster)
    finally:
        rank.stop()
    assert len(problems) == 1, problems
    assert problems[0].startswith("h602 (10.200.0.102): HTTP port 30500 is already in use")
    assert "(a server left from an earlier run? " in problems[0] and "--ppsweep-reap" in problems[0]


def _ssh(cluster: Cluster, index: int) -> object:
    from pytest_ppsweep.cluster.backends import host_for

    return host_for(cluster, cluster.hosts[index])


@pytest.mark.parametrize("launcher", ["docker", "process"])
def test_metadata_of_the_nodes(test_hosts: TestHosts, work: dict[str, Path], launcher: str) -> None:
    sweep = sweep_for(test_hosts, work, launcher)
    meta = nodeinfo.metadata(sweep, sweep.cluster("ns"))
    json.dumps(meta)  # serialisable as it is
    assert [n["hostname"] for n in meta["nodes"]] == ["h601", "h602", "h603", "h604"]
    node = meta["nodes"][2]
    assert len(node["gpus"]) == 8 and node["gpus"][0]["name"] == "NVIDIA RTX 6000D"
    assert node["driver_version"] == node["gpus"][0]["driver_version"] != ""
    assert node["sglang"] is None  # the emulator: SGLang is not installed
    assert node["server_module_dists"] == {"pytest-ppsweep": "0.1.0"}
    if launcher == "docker":
        assert meta["image"] == IMAGE and node["image_id"].startswith("sha256:")
        assert len({n["image_id"] for n in meta["nodes"]}) == 1  # one image loaded everywhere
        assert node["python"].startswith("3.11")
    else:
        assert meta["image"] is None and node["python"] == sys.version.split()[0]


def test_leftovers_are_found_by_label_and_removed(
    test_hosts: TestHosts, work: dict[str, Path]
) -> None:
    docker_sweep = sweep_for(test_hosts, work, "docker")
    docker_cluster = docker_sweep.cluster("ns")
    process_cluster = sweep_for(test_hosts, work, "process").cluster("ns")
    sleeper = ("sh", "-c", "sleep 300")
    # ranks of two "crashed" runs whose handles are dropped without stopping them
    dl = DockerLauncher(docker_cluster, IMAGE, str(work["model"]), [])
    pl = SshProcessLauncher(
        {h.address: _ssh(process_cluster, i) for i, h in enumerate(process_cluster.hosts)}  # type: ignore[misc]
    )
    for run, node in (("crashed-a", 0), ("crashed-a", 1), ("crashed-b", 2)):
        name, address = test_hosts.hosts[node]
        spec = RankSpec(node, name, address, sleeper, {})
        lab = rank_labels(run, "ns", "pp8-tp4-ep4", node)
        dl.start(spec, work["state"] / f"d{node}.log", lab)
        pl.start(spec, work["state"] / f"p{node}.log", lab)

    found = reap.find(docker_cluster, run_id="crashed-a")
    assert sorted((x.host, x.kind, x.ident, x.run, x.config, x.node_rank) for x in found) == [
        (
            "h601",
            "container",
            "ppsweep-crashed-a-pp8-tp4-ep4-node0",
            "crashed-a",
            "pp8-tp4-ep4",
            "0",
        ),
        (
            "h602",
            "container",
            "ppsweep-crashed-a-pp8-tp4-ep4-node1",
            "crashed-a",
            "pp8-tp4-ep4",
            "1",
        ),
    ]
    assert {x.run for x in reap.find(docker_cluster)} == {"crashed-a", "crashed-b"}
    assert reap.find(docker_cluster, run_id="other") == []
    procs = reap.find(process_cluster)
    assert sorted((x.host, x.kind, x.run, x.node_rank) for x in procs) == [
        ("h601", "process", "crashed-a", "0"),
        ("h602", "process", "crashed-a", "1"),
        ("h603", "process", "crashed-b", "2"),
    ]
    assert "h603: process group" in reap.describe(procs)

    assert reap.remove(docker_cluster, reap.find(docker_cluster)) == []
    assert reap.remove(process_cluster, procs) == []
    assert reap.find(docker_cluster) == [] and reap.find(process_cluster) == []
    assert containers(test_hosts) == {} and rank_processes(test_hosts) == []
