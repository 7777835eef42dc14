"""Collecting the traces of an ssh cluster's nodes: each node's folder listed with a real
command, only its own ranks' files fetched, a missing rank named with its node. The transfer is
a local copy here (the SFTP of fabric's ``Connection.get`` runs in tests/remote)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.hosts import LocalHost
from pytest_ppsweep.matrix.model import Cluster, Config, Host, ProfileSpec
from pytest_ppsweep.profile.collect import (
    ProfileError,
    collect_traces,
    remote_dir,
    with_profile_mounts,
)
from pytest_ppsweep.profile.tracenodes import node_ranks

PP2_TP4 = Config(pp=2, tp=4, ep=1)
CLUSTER = Cluster(
    name="ns", kind="ssh", launcher="docker",
    hosts=tuple(Host(f"10.200.0.{101 + i}", f"h60{i + 1}") for i in range(4)),
    gpus_per_node=2, server_module="sglang.launch_server", port=30000, dist_init_port=20000,
    nvidia_smi=(),
)


class _Copy:
    def get(self, remote: str, local: str) -> None:
        shutil.copy(remote, local)


class NodeHost(LocalHost):
    """A node whose 'remote' folder is a folder of this machine."""

    def connection(self) -> _Copy:
        return _Copy()


def _traces(folder: Path, ranks: list[tuple[int, int]], prefix: str = "pp2-tp4-ep1-9.5") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for p, t in ranks:
        (folder / f"{prefix}-TP-{t}-PP-{p}.trace.json.gz").write_bytes(b"x")


def test_each_node_gives_its_own_ranks_and_a_missing_one_is_named(tmp_path: Path) -> None:
    # the namespace hosts share one file system: every node lists the same folder, and each
    # must give only its own ranks (SGLang's placement)
    shared = tmp_path / "shared"
    for n in range(4):
        _traces(shared, node_ranks(2, 4, 4, n))
    _traces(shared, [(0, 0)], prefix="pp2-tp4-ep1-1.0")  # an earlier window: not taken
    local = tmp_path / "run" / "profile" / "pp2-tp4-ep1"
    hosts = [NodeHost(h.name, h.address) for h in CLUSTER.hosts]

    def host_for(n: int) -> NodeHost:
        return hosts[n]

    files = collect_traces(CLUSTER, PP2_TP4, str(shared), local, "pp2-tp4-ep1-9.5",
                           host_for=host_for, timeout_s=1)
    assert sorted(f.name for f in files) == sorted(
        f"pp2-tp4-ep1-9.5-TP-{t}-PP-{p}.trace.json.gz" for p in (0, 1) for t in range(4))
    assert all(f.read_bytes() == b"x" for f in files)

    (shared / "pp2-tp4-ep1-9.5-TP-3-PP-1.trace.json.gz").unlink()
    with pytest.raises(ProfileError) as err:
        collect_traces(CLUSTER, PP2_TP4, str(shared), tmp_path / "again", "pp2-tp4-ep1-9.5",
                       host_for=host_for, timeout_s=0.3)
    # PP2/TP4 on 4 nodes: node 3 runs PP1's TP ranks 2 and 3
    assert str(err.value) == (
        f"pp2-tp4-ep1: profile traces missing:\nnode 3 (h604, 10.200.0.104): no trace of rank "
        f"TP-3-PP-1 in {shared} after 0.3 s")


def test_where_ranks_write_and_the_docker_mount() -> None:
    assert remote_dir(CLUSTER, "/tmp/pp/", "run-1", "pp8", Path("/x")) == "/tmp/pp/run-1/pp8"
    local = replace(CLUSTER, kind="local", launcher="process")
    assert remote_dir(local, "/tmp/pp", "run-1", "pp8", Path("/x/profile")) == "/x/profile"
    from support.paths import REPO

    from pytest_ppsweep.matrix.parse import load

    sweep = load(REPO / "test_matrix" / "ppsweep.toml")
    mounted = with_profile_mounts(replace(sweep, profile=ProfileSpec(output_dir="/srv/prof")))
    assert mounted.clusters["pro6000"].mounts[-1] == "/srv/prof:/srv/prof:rw"
    assert mounted.clusters["local"].mounts == sweep.clusters["local"].mounts
    assert with_profile_mounts(sweep) is sweep  # no profile window: nothing changes
