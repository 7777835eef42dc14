"""No injection: values with shell metacharacters in server flags, env values, the model path,
config extras and the image reach their process as one argument / one environment value, and
the names that cannot be quoted everywhere (hosts, SSH user, flag names, module, cluster, image)
are refused with a clear error. ``OUTCOMES`` is what docs/RELIABILITY.md tabulates.

What runs for real here: the local launcher (a stub server module started as a rank), and the
SSH-process launcher's start script executed by ``sh`` on this machine exactly as the remote
login shell gets it (SshHost.command_line, no SSH transport); the docker launcher's argv and
``docker run`` line are checked by a shlex round-trip. tests/remote/test_injection_remote.py
runs both remote launchers on the namespace hosts."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.injection import HOSTILE, MARKER, STUB_MODULE, write_stub
from support.tomltext import dumps

from pytest_ppsweep.cluster.docker_launcher import DockerLauncher
from pytest_ppsweep.cluster.hosts import LocalLauncher
from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec, local_path, rank_specs
from pytest_ppsweep.cluster.ssh import SshHost, SshSettings
from pytest_ppsweep.cluster.ssh_launcher import start_script
from pytest_ppsweep.matrix import MatrixError, Sweep, load

OUTCOMES: dict[tuple[str, str], str] = {}
NAMES = list(HOSTILE)
__all__ = ["HOSTILE", "MARKER", "OUTCOMES"]  # read by tools/reliability_tables.py


def hostile_doc(stub: Path, dump: Path, model_path: str) -> dict[str, Any]:
    server = {f"flag_{i}": v for i, v in enumerate(HOSTILE.values())}
    env = {f"INJ_{i}": v for i, v in enumerate(HOSTILE.values())}
    return {
        "sweep": {"name": "inject", "model_path": model_path, "image": "local/sim:latest"},
        "server": server,
        "env": env,
        "configs": [{"pp": 1, "tp": 1, "server": {f"extra_{i}": v for i, v in
                                                   enumerate(HOSTILE.values())},
                     "env": {f"CFG_{i}": v for i, v in enumerate(HOSTILE.values())}}],
        "workload": {"input_len": 8, "output_len": 1, "concurrency": [1], "num_requests": 1},
        "clusters": {
            "one": {"kind": "local", "hosts": ["127.0.0.1"], "gpus_per_node": 1,
                    "server_module": STUB_MODULE, "port": 39101, "dist_init_port": 39102,
                    "nvidia_smi": [],
                    "env": {"PYTHONPATH": str(stub), "INJECTION_DUMP": str(dump)}},
            "dock": {"kind": "ssh", "launcher": "docker", "hosts": ["10.200.0.101"],
                     "gpus_per_node": 1, "server_module": STUB_MODULE},
        },
    }


@pytest.fixture
def sweep(tmp_path: Path) -> Sweep:
    stub = write_stub(tmp_path / "stub")
    path = tmp_path / "inject.toml"
    model = "/models/" + "".join(HOSTILE.values())  # every metacharacter in one path
    path.write_text(dumps(hostile_doc(stub, tmp_path / "dump.json", model)), encoding="utf-8")
    return load(path)


def spec_of(sweep: Sweep, cluster: str) -> RankSpec:
    return rank_specs(sweep, sweep.clusters[cluster], sweep.configs[0])[0]


def check_received(argv: list[str], env: dict[str, str], sweep: Sweep, cluster: str) -> None:
    """Each hostile value arrived as exactly one argument (after its flag) / env value; the
    model path as given (a local cluster expands ``~`` and ``$VARS`` in it, by design: on this
    machine, in Python, never by a shell)."""
    for i, value in enumerate(HOSTILE.values()):
        for flag in (f"--flag-{i}", f"--extra-{i}"):
            assert argv[argv.index(flag) + 1] == value, (flag, value)
        assert env[f"INJ_{i}"] == value and env[f"CFG_{i}"] == value
    model = local_path(sweep.clusters[cluster], sweep.model_path)
    assert argv[argv.index("--model-path") + 1] == model


@pytest.fixture(autouse=True)
def no_marker() -> Any:
    yield
    assert not MARKER.exists(), f"a shell ran an injected command: {MARKER} exists"


def test_local_launcher_passes_each_value_as_one_argument(sweep: Sweep, tmp_path: Path) -> None:
    spec = spec_of(sweep, "one")
    handle = LocalLauncher().start(spec, tmp_path / "node0.log",
                                   rank_labels("inject", "one", sweep.configs[0].id, 0))
    deadline = time.monotonic() + 30
    while handle.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handle.poll() == 0, (tmp_path / "node0.log").read_text()
    got = json.loads((tmp_path / "dump.json").read_text())
    assert got["argv"] == list(spec.argv[3:])  # python -m module ARGS: ARGS unchanged
    check_received(got["argv"], got["env"], sweep, "one")
    for name in NAMES:
        for where in ("server flag", "env value", "config extra", "model path"):
            OUTCOMES[(name, f"local: {where}")] = "one argument / value, no shell"


def test_ssh_start_script_run_by_a_real_shell(sweep: Sweep, tmp_path: Path) -> None:
    spec = spec_of(sweep, "one")
    rdir = str(tmp_path / "remote dir; $(touch x)")  # even the rank folder is quoted
    script = start_script(spec, rank_labels("inject", "one", "pp1-tp1-ep1", 0), rdir, "node0")
    # what fabric hands the remote login shell for host.sh(script)
    line = SshHost("h", "127.0.0.1", SshSettings()).command_line(["sh", "-c", script],
                                                                 sudo=False)
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done
    rc = Path(rdir) / "node0.rc"
    deadline = time.monotonic() + 30
    while not rc.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rc.read_text().strip() == "0", (Path(rdir) / "node0.log").read_text()
    got = json.loads((tmp_path / "dump.json").read_text())
    assert got["argv"] == list(spec.argv[3:])
    check_received(got["argv"], got["env"], sweep, "one")
    assert got["env"]["PPSWEEP_RUN"] == "inject"
    for name in NAMES:
        for where in ("server flag", "env value", "config extra", "model path"):
            OUTCOMES[(name, f"ssh-process (script run by sh here): {where}")] = (
                "one argument / value, no shell")


def test_sudo_line_quotes_the_same(sweep: Sweep) -> None:
    spec = spec_of(sweep, "one")
    host = SshHost("h", "127.0.0.1", SshSettings())
    line = host.command_line(["sh", "-c", start_script(spec, {}, "/tmp/r", "n")], sudo=True)
    words = shlex.split(line)
    assert words[:6] == ["sudo", "-k", "-S", "-p", "", "--"]
    assert words[6:8] == ["sh", "-c"] and len(words) == 9  # the script is one argument


def test_docker_argv_and_run_line_round_trip(sweep: Sweep, tmp_path: Path) -> None:
    spec = spec_of(sweep, "dock")
    launcher = DockerLauncher(sweep.clusters["dock"], sweep.image, sweep.model_path)
    labels = rank_labels("inject", "dock", "pp1-tp1-ep1", 0)
    kw = launcher.run_kwargs(spec, labels)
    assert kw["environment"] == dict(spec.env)  # the SDK gets a dict: no shell, no splitting
    check_received(list(spec.argv), dict(spec.env), sweep, "dock")  # Cmd, exec form
    assert sweep.model_path in kw["volumes"]
    words = shlex.split(launcher.docker_run_line(spec, labels))
    image_at = words.index(sweep.image)
    assert words[image_at + 1:] == list(spec.argv)
    env = dict(w.split("=", 1) for i, w in enumerate(words) if i and words[i - 1] == "-e")
    check_received(words[image_at + 1:], env, sweep, "dock")
    for name in NAMES:
        for where in ("server flag", "env value", "config extra", "model path"):
            OUTCOMES[(name, f"docker (argv + docker run line): {where}")] = (
                "one argument / value (shlex round-trip)")


REFUSED = {
    "host name": lambda d, v: d["clusters"]["one"].update(hosts=[v]),
    "host {name, address}": lambda d, v: d["clusters"]["one"].update(
        hosts=[{"name": v, "address": "127.0.0.1"}]),
    "ssh_user": lambda d, v: d["clusters"]["dock"].update(ssh_user=v),
    "server flag name": lambda d, v: d["server"].update({v: 1}),
    "env name": lambda d, v: d["env"].update({v: "1"}),
    "server_module": lambda d, v: d["clusters"]["one"].update(server_module=v),
    "image": lambda d, v: d["sweep"].update(image=v),
    "cluster name": lambda d, v: d["clusters"].update({v: d["clusters"].pop("dock")}),
}


@pytest.mark.parametrize("where", list(REFUSED))
@pytest.mark.parametrize("name", [n for n in NAMES if n != "expansions"] + ["expansions"])
def test_names_that_cannot_be_quoted_are_refused(where: str, name: str, tmp_path: Path) -> None:
    doc = hostile_doc(tmp_path, tmp_path / "d.json", "/m")
    REFUSED[where](doc, HOSTILE[name])
    path = tmp_path / "bad.toml"
    path.write_text(dumps(doc), encoding="utf-8")
    with pytest.raises(MatrixError) as info:
        load(path)
    msg = str(info.value)
    assert str(path) in msg and "key '" in msg and "expected" in msg, msg
    OUTCOMES[(name, f"refused: {where}")] = "MatrixError (usage error)"


@pytest.mark.parametrize("name", NAMES)
def test_image_override_is_refused(name: str, tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(dumps(hostile_doc(tmp_path, tmp_path / "d.json", "/m")), encoding="utf-8")
    with pytest.raises(MatrixError, match="--ppsweep-image"):
        load(path, image=HOSTILE[name])
    OUTCOMES[(name, "refused: --ppsweep-image")] = "MatrixError (usage error)"


@pytest.mark.parametrize("value", ["${PATH}:/x", "{", "}", "{nope}", "{host!r:>{x}}"])
def test_env_placeholder_mistakes_are_usage_errors(value: str, tmp_path: Path) -> None:
    """Env values are templates ({host}, {node_rank}, {cpu_bind}); a bad one used to be a
    ValueError when the layout booted."""
    doc = hostile_doc(tmp_path, tmp_path / "d.json", "/m")
    doc["env"]["LD_LIBRARY_PATH"] = value
    path = tmp_path / "bad.toml"
    path.write_text(dumps(doc), encoding="utf-8")
    with pytest.raises(MatrixError, match=r"key 'env.LD_LIBRARY_PATH': expected a value whose"):
        load(path)
