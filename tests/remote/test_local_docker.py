"""Docker on this machine (``kind = "local"``, ``launcher = "docker"``) against a real dockerd:
a test host's daemon on its local socket (no SSH), the emulator image. The launcher's
containers are asserted as the Docker-over-SSH ones are (tests/remote/test_launchers.py), then
a whole sweep runs on one 8-GPU "machine": pytest itself inside the host's network namespace,
talking to that host's dockerd through ``DOCKER_HOST``; the profile window's traces come back
from the bind-mounted output folder. Nothing may be left on any host (conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.matrices import SMALL_WORKLOAD
from support.paths import ACCEPTANCE
from support.processes import wait_until
from support.remote import (
    IMAGE,
    SECRET_TOKEN,
    TestHosts,
    assert_container_rank_shape,
    container_events,
    containers,
    make_device_dir,
)

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.docker_launcher import METADATA_LABEL, DockerLauncher
from pytest_ppsweep.cluster.kind_local_docker import LocalDaemon
from pytest_ppsweep.cluster.labels import RUN_LABEL, rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster, Host


def labels(run: str, node: int) -> dict[str, str]:
    return rank_labels(run, "box", "pp4-tp8-ep4", node)


def box(**extra: object) -> Cluster:
    return Cluster(
        name="box", kind="local", launcher="docker",
        hosts=(Host(address="127.0.0.1", name="n0"), Host(address="127.0.0.2", name="n1")),
        gpus_per_node=8, server_module="pytest_ppsweep.sim", port=30000, dist_init_port=20000,
        nvidia_smi=(), **extra,  # type: ignore[arg-type]
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def daemon(test_hosts: TestHosts, monkeypatch: pytest.MonkeyPatch) -> str:
    """h602's dockerd stands for this machine's: DOCKER_HOST names its socket."""
    sock = test_hosts.sockets["h602"]
    monkeypatch.setenv("DOCKER_HOST", sock)
    return sock


def test_the_local_docker_backend_launches_through_this_machines_daemon(daemon: str) -> None:
    launcher = backend_of(box()).launcher(registry=Registry())
    assert isinstance(launcher, DockerLauncher) and isinstance(launcher.daemons, LocalDaemon)
    assert launcher.daemons.target("127.0.0.1") == daemon


def test_local_container_rank_has_the_requested_shape(daemon: str, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    devices = make_device_dir(tmp_path / "dev")
    state = tmp_path / "state"
    state.mkdir()
    registry = Registry()
    launcher = DockerLauncher(box(shm_size="1g", mounts=(str(state),)), IMAGE, str(model),
                              [f"{devices}:/dev/infiniband", "/dev/null"], registry,
                              daemons=LocalDaemon(registry))
    line = assert_container_rank_shape(launcher, ("n1", "127.0.0.2"), labels("local-docker", 1),
                                       tmp_path, model, devices, state)
    assert f"DOCKER_HOST={daemon}" in line and "ssh://" not in line


def test_local_container_rank_that_exits_and_a_missing_image(
    daemon: str, tmp_path: Path
) -> None:
    launcher = backend_of(box()).launcher(registry=Registry())
    assert isinstance(launcher, DockerLauncher)
    launcher.image = IMAGE
    spec = RankSpec(0, "n0", "127.0.0.1", ("sh", "-c", "echo last words; exit 3"), {})
    log = tmp_path / "node0.log"
    rank = launcher.start(spec, log, labels("local-docker-exit", 0))
    wait_until(lambda: rank.poll() is not None, 30, "the container's exit")
    assert rank.poll() == 3 and lines(log) == ["last words"]
    # a container of ours left under the same name (an earlier attempt) is replaced
    again = launcher.start(spec, tmp_path / "again.log", labels("local-docker-exit", 0))
    assert again.name == rank.name
    assert again.stop() is not None and rank.stop() == 3
    launcher.image = "local/not-here:1"
    with pytest.raises(HostError, match="host n0: image local/not-here:1 is not present"):
        launcher.start(spec, log, labels("local-docker-missing", 0))


ONE_MACHINE = """
[[configs]]
pp = 1
tp = 8

[[configs]]
pp = 2
tp = 4
"""


def one_machine_folder(test_hosts: TestHosts, tmp_path: Path, server: str = "") -> Path:
    """A sweep folder of two layouts on one 8-GPU box: h601's dockerd (``DOCKER_HOST``), the
    emulator image; ``server``: lines added to its ``[server]`` table."""
    name, address = test_hosts.hosts[0]
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    state = tmp_path / "simstate"
    state.mkdir()
    traces = tmp_path / "traces"
    smi = (f'["env", "PPSWEEP_SIM_STATE_DIR={state}", "{sys.executable}", "-m", '
           '"pytest_ppsweep.sim.smi", "--host", "{host}"]')
    matrix = (
        f'[sweep]\nname = "box"\nmodel_path = "{model}"\ncluster = "box"\nep_cap = 4\n'
        'boot_timeout_s = 60\nspread_rule = "warn"\n\n'
        f"[server]\nchunked_prefill_size = 8192\ndisable_radix_cache = true\n{server}"
        f"{ONE_MACHINE}{SMALL_WORKLOAD}"
        f'\n[profile]\noutput_dir = "{traces}"\ntimeout_s = 30\n\n'
        "[clusters.box]\n"
        'kind = "local"\nlauncher = "docker"\n'
        f'hosts = [{{ name = "{name}", address = "{address}" }}]\n'
        'gpus_per_node = 8\nserver_module = "pytest_ppsweep.sim"\npython = "python3"\n'
        f'nvidia_smi = {smi}\nshm_size = "1g"\nmounts = ["{state}"]\n'
        "env = { "
        f'PPSWEEP_SIM_TIME_SCALE = "1000", PPSWEEP_SIM_STATE_DIR = "{state}", '
        f'PPSWEEP_SIM_PROFILE = "kimi-k3-6000d", HF_TOKEN = "{SECRET_TOKEN}"'
        " }\n"
    )
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "ppsweep.toml").write_text(matrix)
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    return folder


def in_h601(test_hosts: TestHosts, folder: Path, cwd: Path, *args: str
            ) -> subprocess.CompletedProcess[str]:
    """pytest on ``folder`` inside h601's network namespace, its dockerd as this machine's."""
    name = test_hosts.hosts[0][0]
    return subprocess.run(
        ["nsenter", f"--net=/run/netns/{name}", sys.executable, "-m", "pytest", str(folder),
         "-p", "no:cacheprovider", "--ppsweep-image", IMAGE, *args],
        cwd=cwd, env={**os.environ, "DOCKER_HOST": test_hosts.sockets[name]},
        capture_output=True, text=True, timeout=600, check=False,
    )


def test_a_sweep_on_one_machine_through_its_own_dockerd(
    test_hosts: TestHosts, tmp_path: Path
) -> None:
    """pytest runs inside h601's network namespace (its address is this machine's) and starts
    the ranks through h601's dockerd on its socket: one 8-GPU box, two layouts."""
    name, address = test_hosts.hosts[0]
    sock = test_hosts.sockets[name]
    traces = tmp_path / "traces"
    folder = one_machine_folder(test_hosts, tmp_path)
    reports = tmp_path / "reports"
    done = in_h601(test_hosts, folder, tmp_path, "-v", "--ppsweep-reports", str(reports))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    summary = out.strip().splitlines()[-1]
    # the acceptance tests of two layouts (8 each, test_outputs_match too), profile windows
    assert summary.startswith("18 passed,") or "= 18 passed," in summary, out[-6000:]
    assert " failed" not in summary and " error" not in summary, out[-6000:]
    run = next(p for p in reports.iterdir() if p.is_dir())
    configs = {r.split(",")[0] for r in (run / "configs.csv").read_text().splitlines()[1:]}
    assert configs == {"pp1-tp8-ep4", "pp2-tp4-ep4"}
    for cid in sorted(configs):
        service = run / "service" / cid
        assert sorted(p.name for p in service.iterdir()) == [
            "launch.sh", "node0.docker-run.sh", "node0.log"]
        log = (service / "node0.log").read_text()
        assert "SIMULATED SGLang" in log and f"'host': '{address}'" in log
        line = (service / "node0.docker-run.sh").read_text()
        assert f"DOCKER_HOST={sock}" in line and f"--label ppsweep.run={run.name}" in line
        assert "--network host --ipc host --shm-size 1g" in line and "--gpus all" in line
        assert f"-v {traces}:{traces}:rw" in line  # the profile window's folder
        assert f"test_profile[{cid}] PASSED" in out, out[-6000:]
        # every rank's trace came back from the mounted folder into the run folder
        assert len(list((run / "profile" / cid).glob("*.trace.json.gz"))) == 8
        assert sorted(p.stem for p in (run / "gpu" / cid).iterdir()) == [
            "after", "before", "cleaned", "healthy"]
    nodes = json.loads((run / "metadata" / "nodes-box.json").read_text())
    assert (nodes["kind"], nodes["launcher"], nodes["image"]) == ("local", "docker", IMAGE)
    assert [n["name"] for n in nodes["nodes"]] == [name]
    assert all(n["image_id"].startswith("sha256:") for n in nodes["nodes"])
    assert not containers(test_hosts)  # every container stopped and removed
    assert SECRET_TOKEN not in out


def _created(sock: str, since: float, label: str) -> list[str]:
    """Every create of a container labelled ``label`` on the dockerd at ``sock`` since
    ``since``, as ``create <image>``."""
    return [f"create {e['Actor']['Attributes'].get('image', '')}"
            for e in container_events(sock, since, label, ("create",))]


def test_a_misspelt_flag_is_refused_in_the_image_before_any_container_starts(
    test_hosts: TestHosts, tmp_path: Path
) -> None:
    """Docker on this machine: the server's own parser runs in a throwaway container of the
    image on this machine's dockerd, in the dry run and in the run's preflight; a misspelt
    flag is refused with the parser's suggestion and no rank container is ever created. A clean
    sweep's dry run says where its flags were checked."""
    sock = test_hosts.sockets[test_hosts.hosts[0][0]]
    for sub in ("clean", "typo"):
        (tmp_path / sub).mkdir()
    clean = in_h601(test_hosts, one_machine_folder(test_hosts, tmp_path / "clean"), tmp_path,
                    "--ppsweep-dry-run")
    assert clean.returncode == 0, (clean.stdout + clean.stderr)[-4000:]
    assert ("cluster 'box': server flags, [axes] keys and choices checked against "
            f"pytest_ppsweep.sim's own argument parser in image {IMAGE} on this machine's "
            "dockerd") in clean.stdout, clean.stdout[-4000:]
    folder = one_machine_folder(test_hosts, tmp_path / "typo", "chunked_prefil_size = 4096\n")
    reports = tmp_path / "reports"
    since = time.time()
    expected = (f"{folder / 'ppsweep.toml'}: key 'server.chunked_prefil_size': expected a flag "
                "of pytest_ppsweep.sim (did you mean 'chunked_prefill_size'?), found "
                "--chunked-prefil-size, which its argument parser does not accept")
    dry = in_h601(test_hosts, folder, tmp_path, "--ppsweep-dry-run", "--ppsweep-reports",
                  str(reports))
    assert dry.returncode == pytest.ExitCode.USAGE_ERROR, (dry.stdout + dry.stderr)[-4000:]
    assert "--ppsweep-dry-run: preflight of cluster 'box'" in dry.stderr, dry.stderr[-4000:]
    assert expected in dry.stderr, dry.stderr[-4000:]
    done = in_h601(test_hosts, folder, tmp_path, "--ppsweep-reports", str(reports))
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, (done.stdout + done.stderr)[-4000:]
    assert "nothing was started" in done.stderr and expected in done.stderr, done.stderr[-4000:]
    # the parser ran in the image (one throwaway container per run: the dry run's, the run's)
    assert _created(sock, since, METADATA_LABEL) == [f"create {IMAGE}"] * 2
    assert _created(sock, since, RUN_LABEL) == []  # no rank container
    assert not reports.exists() or not any(reports.iterdir())
