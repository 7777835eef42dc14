"""One backend per cluster kind: the registry of cluster/backends.py is derived from the table
of kinds (matrix/kinds.py, which cannot import cluster/), failing when a pair of the table has no
code or code names a pair the table has not; and each backend answers for its kind."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_ppsweep.cluster.backend import Backend
from pytest_ppsweep.cluster.backends import BACKENDS, CODE, backend_of, pair_code
from pytest_ppsweep.cluster.hosts import LocalHost, LocalLauncher
from pytest_ppsweep.cluster.kind_local import LocalProcessBackend
from pytest_ppsweep.cluster.kind_local_docker import LocalDockerBackend
from pytest_ppsweep.cluster.kind_slurm import SlurmBackend, SlurmPyxisBackend
from pytest_ppsweep.matrix import kinds
from pytest_ppsweep.matrix.model import Cluster, Host
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings, with_slurm

LOCAL = Cluster(
    name="box", kind="local", launcher="process",
    hosts=(Host("127.0.0.1", "n0"), Host("127.0.0.2", "n1")), gpus_per_node=8,
    server_module="pytest_ppsweep.sim", port=30000, dist_init_port=20000,
    nvidia_smi=("smi", "--hosts", "{hosts}"),
)


def test_the_registry_is_the_table_of_kinds_with_its_code() -> None:
    assert set(BACKENDS) == kinds.pairs()
    for kind, launcher in BACKENDS:
        backend = backend_of(replace(LOCAL, kind=kind, launcher=launcher))
        assert (backend.kind, backend.launcher_name) == (kind, launcher)
        # what the table says of the pair is read from it, not said again by the code
        assert backend.in_containers is kinds.NEEDS_IMAGE[launcher]
        assert backend.nodes_from_allocation is kinds.CLUSTER_KINDS[kind].allocated


class _PodmanBackend(LocalProcessBackend):
    launcher_name = "podman"


def test_a_pair_without_code_or_code_without_a_pair_fails_the_registry() -> None:
    pairs = kinds.pairs()
    with pytest.raises(TypeError, match=r"^no Backend for ssh \+ docker of the table of kinds"):
        pair_code([c for c in CODE if c.__name__ != "SshDockerBackend"], pairs)
    with pytest.raises(TypeError, match="_PodmanBackend is the code of local \\+ podman, which "
                                        "the table of kinds"):
        pair_code([*CODE, _PodmanBackend], pairs)
    with pytest.raises(TypeError, match="LocalProcessBackend and LocalProcessBackend are both"):
        pair_code([*CODE, LocalProcessBackend], pairs)
    # a new row of the table asks for its code
    with pytest.raises(TypeError, match=r"no Backend for local \+ podman"):
        pair_code(CODE, {*pairs, ("local", "podman")})
    assert all(issubclass(c, Backend) for c in CODE)


def test_an_unknown_pair_has_no_backend() -> None:
    with pytest.raises(NotImplementedError, match="box': local \\+ podman has no backend"):
        backend_of(replace(LOCAL, launcher="podman"))


def test_slurm_with_a_container_image_is_pyxis() -> None:
    slurm = replace(LOCAL, kind="slurm")
    assert type(backend_of(slurm)) is SlurmBackend
    assert type(backend_of(with_slurm(slurm, container_image="img.sqsh"))) is SlurmPyxisBackend
    assert type(backend_of(replace(slurm, settings=SlurmSettings(container_image="i")))) is (
        SlurmPyxisBackend)
    assert backend_of(slurm).nodes_from_allocation
    assert backend_of(slurm).node_checks(rank0=True)[0] == "module"
    assert backend_of(with_slurm(slurm, container_image="i")).node_checks(rank0=False) == (
        "pyxis_image", "paths", "gpus", "ports")


def test_local_kinds_are_this_machine(tmp_path: Path) -> None:
    proc, dock = backend_of(LOCAL), backend_of(replace(LOCAL, launcher="docker"))
    assert isinstance(dock, LocalDockerBackend)
    for b in (proc, dock):
        assert b.on_this_machine and not b.nodes_from_allocation and b.one_smi_call()
        assert b.nodes_to_ask() == LOCAL.hosts[:1]
        assert isinstance(b.host(LOCAL.hosts[1]), LocalHost)
    assert isinstance(proc.launcher(), LocalLauncher)
    # processes write their traces into the run folder; containers into the mounted output_dir
    assert proc.trace_dir("/srv/p", "r1", "pp2", tmp_path) == str(tmp_path)
    assert dock.trace_dir("/srv/p/", "r1", "pp2", tmp_path) == "/srv/p/r1/pp2"
    assert not proc.reaps_by_label and dock.reaps_by_label  # containers outlive a killed run
    assert proc.node_checks(rank0=True) == ("module", "flags", "local_ports")
    assert dock.node_checks(rank0=True) == ("image", "flags", "paths", "gpus", "local_ports")
    # a container's traces are copied from the folder it wrote them in
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "a.trace.json").write_text("x")
    assert dock.list_files(LocalHost("n0", "127.0.0.1"), str(remote)) == {"a.trace.json": 1}
    local = tmp_path / "local"
    local.mkdir()
    dock.fetch_files(LocalHost("n0", "127.0.0.1"), str(remote), ["a.trace.json"], local)
    assert (local / "a.trace.json").read_text() == "x"


def test_the_dry_run_says_where_commands_run() -> None:
    from support.paths import REPO

    from pytest_ppsweep.matrix.parse import load

    sweep = load(REPO / "test_matrix" / "ppsweep.toml")
    assert backend_of(LOCAL).dry_run_lines(sweep) == []
    assert backend_of(replace(LOCAL, launcher="docker")).dry_run_lines(sweep) == [
        f"each command runs in a container of image {sweep.image} on its node, with the "
        "container options: --init --network host --ipc host --shm-size 32g --gpus all "
        "--device /dev/infiniband:/dev/infiniband:rwm "
        "-v /data/hf_models/Kimi-K3:/data/hf_models/Kimi-K3:ro"]


def test_every_kind_checks_the_server_flags_once_on_node_0() -> None:
    """The server's parser runs where the engine runs, on node 0 only (the "flags" check),
    right after the checks that the engine can start there (module, image, or Pyxis and the
    node's import of the image)."""
    for kind, launcher in BACKENDS:
        for image in ("", "img.sqsh"):
            cluster = replace(LOCAL, kind=kind, launcher=launcher)
            if kind == "slurm":
                cluster = with_slurm(cluster, container_image=image)
            backend = backend_of(cluster)
            first = backend.node_checks(rank0=True)
            engine = ("pyxis", "pyxis_image") if image and kind == "slurm" else first[:1]
            assert first.count("flags") == 1 and first[:first.index("flags")] == engine, (
                backend, first)
            assert "flags" not in backend.node_checks(rank0=False), backend
            assert backend.flags_where
