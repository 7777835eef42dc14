"""``extends``: a sweep file takes its cluster, server, env and workload tables from a shared
file; its own keys win; an error names the file that holds the offending key."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from support.matrices import seed_text
from support.paths import DATA, REPO, SEED

from pytest_ppsweep.cluster.serverflags import ServerFlags, check
from pytest_ppsweep.matrix.model import Sweep
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import MatrixError

MATRIX = REPO / "test_matrix"

SHARED = """
[server]
chunked_prefill_size = 8192
mem_fraction_static = 0.88

[env]
NCCL_SOCKET_IFNAME = "bond0"

[workload]
input_len = 1024
output_len = 1
concurrency = [1, 2]
num_requests = 4

[clusters.gpu]
kind = "local"
hosts = ["127.0.0.1", "127.0.0.2"]
gpus_per_node = {gpus}
nvidia_smi = ["nvidia-smi", "-i", "0"]
"""

SWEEP = """extends = "shared/cluster.toml"

[sweep]
model_path = "/models/m"

[server]
mem_fraction_static = 0.8{server}

[[configs]]
pp = 2
tp = 1

[workload]
concurrency = [4]

[clusters.gpu]
nvidia_smi = []
"""


def _write(tmp_path: Path, gpus: str = "1", server: str = "") -> tuple[Path, Path]:
    shared = tmp_path / "shared" / "cluster.toml"
    shared.parent.mkdir(exist_ok=True)
    shared.write_text(SHARED.format(gpus=gpus))
    sweep = tmp_path / "ppsweep.toml"
    sweep.write_text(SWEEP.format(server=server))
    return sweep, shared


def test_the_sweep_files_own_keys_win_and_tables_merge_key_by_key(tmp_path: Path) -> None:
    path, shared = _write(tmp_path)
    sweep = load(path)
    assert dict(sweep.server) == {"chunked_prefill_size": 8192, "mem_fraction_static": 0.8}
    assert dict(sweep.env) == {"NCCL_SOCKET_IFNAME": "bond0"}
    assert sweep.workload.concurrency == (4,) and sweep.workload.input_len == 1024
    gpu = sweep.cluster("gpu")
    assert len(gpu.hosts) == 2 and gpu.nvidia_smi == ()  # an array is replaced whole
    assert sweep.file_of("clusters.gpu.hosts") == shared.resolve()
    assert sweep.file_of("clusters.gpu.nvidia_smi") == path
    assert sweep.file_of("server.mem_fraction_static") == path


def test_an_error_names_the_file_that_holds_the_key(tmp_path: Path) -> None:
    path, shared = _write(tmp_path, gpus="0")
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(err.value) == (f"{shared.resolve()}: key 'clusters.gpu.gpus_per_node': expected "
                              f"a value ≥ 1, found int 0")
    shared.write_text(SHARED.format(gpus="1") + "gpus_per_nod = 2\n")
    with pytest.raises(MatrixError, match=r"^" + str(shared.resolve()) +
                       r": unknown key 'clusters.gpu.gpus_per_nod' \(did you mean 'gpus_per_node'"):
        load(path)
    shared.write_text('[sweep]\nname = "x"\n' + SHARED.format(gpus="1"))
    with pytest.raises(MatrixError, match=r"^" + str(shared.resolve()) + r": key 'sweep': "
                       r"expected only the tables a sweep file can share"):
        load(path)
    shared.unlink()
    with pytest.raises(MatrixError, match=r"^" + str(path) + r": key 'extends': expected a "
                       r"shared TOML file, found 'shared/cluster.toml' \(no file "):
        load(path)


def test_the_flag_check_names_the_shared_file(tmp_path: Path) -> None:
    path, shared = _write(tmp_path)
    shared.write_text(SHARED.format(gpus="1").replace("chunked_prefill_size",
                                                      "chunked_prefil_size"))
    flags = ServerFlags("sglang.launch_server", frozenset({"--chunked-prefill-size",
                                                          "--mem-fraction-static"}), {}, {})
    assert check(load(path), flags) == [
        f"{shared.resolve()}: key 'server.chunked_prefil_size': expected a flag of "
        f"sglang.launch_server (did you mean 'chunked_prefill_size'?), found "
        f"--chunked-prefil-size, which its argument parser does not accept"]


def _resolved(sweep: Sweep) -> Sweep:
    """The sweep as it runs: not where it was read from, nor which file held which key."""
    return replace(sweep, path=Path("ppsweep.toml"), origins=())


def test_the_seed_sweep_takes_the_shared_file_and_reads_as_it_did_whole(tmp_path: Path) -> None:
    """ppsweep.toml takes its clusters, [server] and [env] from cluster.toml and resolves to the
    very sweep it was when it held them itself (tests/data/ppsweep-whole.toml, its text then);
    seed_text(), the self-contained text the tests edit, reads as the same sweep."""
    seed = load(SEED)
    assert re.findall(r"^\[(server|env|clusters\.[^\]]*)\]", SEED.read_text(), flags=re.M) == []
    assert seed.file_of("clusters.local.hosts") == (MATRIX / "cluster.toml").resolve()
    assert seed.file_of("server.chunked_prefill_size") == (MATRIX / "cluster.toml").resolve()
    whole = load(DATA / "ppsweep-whole.toml")
    assert _resolved(seed) == _resolved(whole)
    for part in ("clusters", "server", "env"):  # in the same order too
        assert list(getattr(seed, part).items()) == list(getattr(whole, part).items())
    (tmp_path / "ppsweep.toml").write_text(seed_text())
    inlined = load(tmp_path / "ppsweep.toml")
    assert inlined.origins == () and _resolved(inlined) == _resolved(seed)
    for part in ("clusters", "server", "env"):
        assert list(getattr(inlined, part).items()) == list(getattr(seed, part).items())


@pytest.mark.parametrize("name", ["a2a.toml", "chunk.toml", "microbatch.toml", "slo.toml"])
def test_the_example_sweeps_share_the_shipped_cluster_file(name: str) -> None:
    """test_matrix/cluster.toml holds the clusters, [server] and [env] the examples share; they
    read as the seed sweep's (as it was whole: tests/data/ppsweep-whole.toml)."""
    seed, sweep = load(DATA / "ppsweep-whole.toml"), load(MATRIX / name)
    text = (MATRIX / name).read_text()
    clusters = dict(sweep.clusters)
    if name == "microbatch.toml":
        # its decode rounds need the emulator at time scale 20 (its comment says why): the one
        # cluster key it sets itself, merged into the shared clusters' env
        assert re.findall(r"^\[clusters\.[^\]]*\]", text, flags=re.M) == [
            "[clusters.local.env]", "[clusters.local-b.env]"]
        for key in ("local", "local-b"):
            env = dict(clusters[key].env)
            assert env.pop("PPSWEEP_SIM_TIME_SCALE") == "20"
            clusters[key] = replace(clusters[key], env=env)
    else:
        assert "[clusters." not in text
    assert clusters == dict(seed.clusters) and sweep.server == seed.server
    assert sweep.env == seed.env
    assert sweep.file_of("clusters.pro6000.hosts") == (MATRIX / "cluster.toml").resolve()
