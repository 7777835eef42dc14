"""Helpers of the real-SGLang tests: provisioning, the sweep folder, process lookup in /proc."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.matrices import cpu_text, drop_table
from support.paths import REPO, SCRIPTS
from support.processes import cmdline, proc_entries

CPU_TOML = REPO / "test_matrix" / "cpu.toml"
PROVISION = SCRIPTS / "provision_sglang_cpu.sh"
PROVISION_VLLM = SCRIPTS / "provision_vllm_cpu.sh"
MARK_VAR = "PPSWEEP_REAL_TEST_MARK"

# Written next to the acceptance tests of every generated sweep folder. SGLang's /health on rank
# 0 runs a one-token generation through every PP stage and TP rank, which takes ~1-3 s on CPU over
# gloo; the plugin's readiness poll gives it 0.5 s, so rank 0 never looks healthy. Until
# pytest_ppsweep/service/readiness.py waits long enough for it, the probe gets a longer timeout
# here.
READINESS_WORKAROUND = '''\
"""Test-only workaround (tests/real): a longer /health timeout for real SGLang on CPU."""
import pytest_ppsweep.service.readiness as _readiness
from pytest_ppsweep.service.probe import health as _health


def _patient_health(base_url, timeout=2.0):
    return _health(base_url, timeout=max(timeout, 10.0))


if getattr(_readiness, "HEALTH_TIMEOUT_S", 0) < 5:
    _readiness.health = _patient_health
'''


@dataclass(frozen=True)
class Provisioned:
    """What scripts/provision_sglang_cpu.sh made: the venv's python and the tiny models."""

    python: str
    models: dict[str, str]
    seconds: float


class ProvisionImpossible(RuntimeError):
    """Provisioning cannot work on this machine (no Python 3.11, no package index)."""


def provision(timeout_s: float = 1200.0, script: Path = PROVISION,
              engine: str = "SGLANG") -> Provisioned:
    """Run a provisioning script (seconds when already done); parse its last lines: the
    engine's ``PPSWEEP_<ENGINE>_PYTHON`` and every ``PPSWEEP_[<ENGINE>_]MODEL_<NAME>``."""
    import time

    t0 = time.monotonic()
    proc = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode in (2, 3):
        raise ProvisionImpossible(proc.stderr.strip().splitlines()[-1])
    if proc.returncode != 0:
        raise RuntimeError(
            f"{script} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    values = dict(
        line.split("=", 1) for line in proc.stdout.splitlines() if line.startswith("PPSWEEP_")
    )
    prefix = "PPSWEEP_MODEL_" if engine == "SGLANG" else f"PPSWEEP_{engine}_MODEL_"
    models = {
        k.removeprefix(prefix).lower().replace("_", "-"): v
        for k, v in values.items()
        if k.startswith(prefix)
    }
    return Provisioned(values[f"PPSWEEP_{engine}_PYTHON"], models, time.monotonic() - t0)


def sweep_toml(
    prov: Provisioned,
    *,
    port: int,
    dist_port: int,
    mark: str,
    configs: str | None = None,
    model: str = "tiny-qwen3moe",
    baseline: str | None = None,
    slo: str | None = None,
    **workload: object,
) -> str:
    """test_matrix/cpu.toml with this machine's paths, private ports, a process mark, and
    optionally other layouts (``configs``: TOML ``[[configs]]`` blocks), workload values and a
    ``[workload.slo]`` table (``slo``: its TOML text)."""
    # cpu.toml's SLO search and profile window run only where a test asks for them (the shared
    # run of its docs command, support.shared_fixtures.cpu_sweep): each costs real rounds.
    text = cpu_text()  # without its [accuracy] (the shared docs run checks it)
    for table in ("workload.slo", "profile"):
        text = drop_table(text, table)
    subs = [
        (r'^python = ".*"$', f"python = {json.dumps(prov.python)}"),
        (r'^model_path = ".*"$', f"model_path = {json.dumps(prov.models[model])}"),
        (r"^port = \d+$", f"port = {port}"),
        (r"^dist_init_port = \d+$", f"dist_init_port = {dist_port}"),
    ]
    if baseline:
        subs.append((r'^baseline = ".*"$', f"baseline = {json.dumps(baseline)}"))
    for key, value in workload.items():
        subs.append((rf"^{key} = .*$", f"{key} = {json.dumps(value)}"))
    for pattern, repl in subs:
        text, n = re.subn(pattern, lambda _m, r=repl: r, text, count=1, flags=re.M)
        assert n == 1, f"{CPU_TOML}: no line matches {pattern!r}"
    if configs is not None:
        start, end = text.index("[[configs]]"), text.index("[workload]")
        text = text[:start] + configs.strip() + "\n\n" + text[end:]
    if slo is not None:
        text = text.replace("[clusters.cpu]\n", slo.strip() + "\n\n[clusters.cpu]\n", 1)
    # Every rank (and every child it forks) inherits this, so /proc tells our ranks apart.
    text = text.replace("[clusters.cpu.env]\n", f'[clusters.cpu.env]\n{MARK_VAR} = "{mark}"\n')
    return text


def marked_processes(mark: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries ``mark``."""
    found = []
    needle = f"{MARK_VAR}={mark}".encode()
    for entry in proc_entries():
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmd = cmdline(entry)
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append((int(entry.name), cmd))
    return found


def node_processes(mark: str, node_rank: int) -> list[tuple[int, str]]:
    """The processes of one node's rank: its launcher and everything in its process group."""
    procs = marked_processes(mark)
    leaders = [pid for pid, cmd in procs if f"--node-rank {node_rank} " in cmd + " "]
    if not leaders:
        return []
    group = os.getpgid(leaders[0])
    out = []
    for pid, cmd in procs:
        try:
            if os.getpgid(pid) == group:
                out.append((pid, cmd))
        except ProcessLookupError:
            continue
    return out


def outcomes(junit_xml: Path) -> dict[str, str]:
    """{test id: passed | failed | error | skipped} from a --junitxml file (an error in setup
    or teardown wins over the call's outcome)."""
    import xml.etree.ElementTree as ET

    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    out: dict[str, str] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        got = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(
            max(kinds, key=lambda k: ["skipped", "failure", "error"].index(k)) if kinds else "",
            "passed",
        )
        name = case.get("name", "")
        if name not in out or rank[got] > rank[out[name]]:
            out[name] = got
    return out


def messages(junit_xml: Path) -> dict[str, str]:
    """{test id: failure/error text} from a --junitxml file."""
    import xml.etree.ElementTree as ET

    out: dict[str, str] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                text = (child.get("message") or "") + "\n" + (child.text or "")
                out[case.get("name", "")] = out.get(case.get("name", ""), "") + text
    return out


def kill_marked(mark: str, grace_s: float = 2.0) -> list[tuple[int, str]]:
    """The processes carrying ``mark`` still there after ``grace_s`` (the plugin waits for every
    group), SIGKILLed; empty when none was left."""
    import contextlib
    import signal
    import time

    deadline = time.monotonic() + grace_s
    while (left := marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid, _cmd in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def assert_none_left(mark: str, grace_s: float = 2.0) -> None:
    """No process carrying ``mark`` is left: stragglers get ``grace_s``, then whatever is left
    is SIGKILLed and the check fails naming it."""
    left = kill_marked(mark, grace_s)
    assert not left, "SGLang processes left running:\n" + "\n".join(
        f"{pid} {cmd}" for pid, cmd in left)
