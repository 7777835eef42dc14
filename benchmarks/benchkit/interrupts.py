"""Interrupts at seeded random moments (issue 16, point 4): the scenario engine shared by
tests/reliability/test_interrupts.py, tests/remote/test_interrupts_remote.py and
benchmarks/bench_interrupts.py.

One *case* is one ``pytest <sweep>`` run in a process group of its own (as a terminal's
foreground job), interrupted once:

* ``SIGINT``: Ctrl-C, sent to the whole process group as a terminal does;
* ``SIGTERM``: ``kill <pid>`` of the pytest process;
* ``SIGKILL``: ``kill -9 <pid>`` of the pytest process (no teardown runs), then
  ``--ppsweep-resume`` of its run folder.

The moment is drawn from a seeded RNG over the phases (:data:`PHASES`) and triggered on an
observed event — a progress.log line, a file of the run folder appearing, a request line of a
round's raw file, a rank log's boot line — plus an extra delay drawn from the same seed. Every
wait is bounded. After the case the checks of :func:`check` run: no process, container or
namespace left on any host, every finished round present exactly once (results.csv, its raw
file complete), and after a resume every round of the sweep present exactly once.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from support.paths import ACCEPTANCE
from support.processes import cmdline, proc_entries, state, wait_until

from pytest_ppsweep.cluster.ports import listeners
from pytest_ppsweep.cluster.reap import find_local, reap_local
from pytest_ppsweep.sim.model.profile import resolve_profile_path

PHASES = ("boot", "round", "log scan", "teardown", "report")
SIGNALS = ("SIGINT", "SIGTERM")
CONFIG = "pp1-tp1-ep1"
CONCURRENCY = (1, 2)
REPEATS = 2
NUM_REQUESTS = 6
ROUNDS = tuple((CONFIG, c, r) for c in CONCURRENCY for r in range(1, REPEATS + 1))
# Loopback addresses and ports of these cases only (127.0.47.1-254, 44500-44999).
NET = "127.0.47"
PORT_BASE = 44500
TIME_SCALE = 100  # the boot lasts ~1 s of real time, a round ~20-60 ms
EXIT_TIMEOUT_S = 60.0
TRIGGER_TIMEOUT_S = 60.0
GROUP_EXIT_S = 10.0  # how long a helper of the interrupted pytest may take to finish exiting

# The smallest emulator sweep: one node, one GPU, one layout, 2 Cs x 2 repeats x 6 requests.
MATRIX = """
[sweep]
name = "intr"
model_path = "{model}"
cluster = "{cluster}"
boot_timeout_s = 60
# not about spread: rounds of a few ms on a loaded machine
spread_rule = "warn"

[[configs]]
pp = 1
tp = 1

[workload]
input_len = 1024
output_len = 1
concurrency = [1, 2]
num_requests = {requests}
repeats = {repeats}
vocab_size = 1000
"""

LOCAL_CLUSTER = """
[clusters.{cluster}]
kind = "local"
hosts = ["{host}"]
gpus_per_node = 1
server_module = "pytest_ppsweep.sim"
port = {port}
dist_init_port = {dist}
nvidia_smi = ["{{python}}", "-m", "pytest_ppsweep.sim.smi", "--host", "{{host}}"]
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}", \
PPSWEEP_SIM_PROFILE = "{profile}" }}
"""


def one_gpu_profile(dest: Path) -> Path:
    """The shipped ``tiny`` profile with one GPU per node (every other figure and its source
    unchanged), written to ``dest``."""
    raw = tomllib.loads(resolve_profile_path("tiny").read_text())
    raw["name"] = "tiny-1gpu"
    raw["gpu"]["gpus_per_node"] = raw["gpu"]["gpus_per_pcie_island"] = 1
    lines = [f'name = "{raw.pop("name")}"']
    for section, values in raw.items():
        lines.append(f"\n[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")
    return dest


# -- moments ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Moment:
    """When to interrupt: ``trigger`` (an event of ``phase``) seen, then ``delay_s`` more."""

    index: int
    phase: str
    signal: str
    trigger: str  # what is watched, in words (the table's "moment")
    delay_s: float
    # round: which round, and after how many of its requests are on disk
    round: tuple[int, int] = (0, 0)
    after_requests: int = 0

    def describe(self) -> str:
        return f"{self.phase}: {self.trigger} +{self.delay_s * 1000:.0f} ms"


def moments(seed: int, count: int, signals: tuple[str, ...] = SIGNALS,
            phases: tuple[str, ...] = PHASES, start: int = 0) -> list[Moment]:
    """``count`` moments drawn from ``random.Random(seed)``: each pass over the phases is in a
    random order (so every phase gets its share), each moment's signal, trigger and delay are
    drawn too. Indexes (which pick a case's addresses and ports) start at ``start``."""
    rng = random.Random(seed)
    out: list[Moment] = []
    order: list[str] = []
    while len(out) < count:
        if not order:
            order = list(phases)
            rng.shuffle(order)
        phase = order.pop()
        sig = rng.choice(signals)
        i = start + len(out)
        if phase == "boot":
            trigger = rng.choice(["'booting on' in progress.log", "node0.log: Load weight begin",
                                  "node0.log: KV Cache is allocated"])
            out.append(Moment(i, phase, sig, trigger, rng.uniform(0.0, 0.15)))
        elif phase == "round":
            conc = rng.choice(CONCURRENCY)
            repeat = rng.randint(1, REPEATS)
            after = rng.randint(0, NUM_REQUESTS - 1)
            trigger = f"raw c{conc}-r{repeat}.jsonl has {after}/{NUM_REQUESTS} requests"
            out.append(Moment(i, phase, sig, trigger, rng.uniform(0.0, 0.01), (conc, repeat),
                              after))
        elif phase == "log scan":
            out.append(Moment(i, phase, sig, "'log scan' in progress.log",
                              rng.uniform(0.0, 0.02)))
        elif phase == "teardown":
            out.append(Moment(i, phase, sig, "'teardown' in progress.log",
                              rng.uniform(0.0, 0.05)))
        else:
            trigger = rng.choice(["summary.csv written", "benchmark.json written"])
            out.append(Moment(i, phase, sig, trigger, rng.uniform(0.0, 0.05)))
    return out


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def triggered(moment: Moment, run: Path) -> bool:
    """Whether ``moment``'s event is visible in the run folder ``run`` now."""
    progress = run / "progress.log"
    if moment.phase == "boot":
        if moment.trigger.startswith("'booting on'"):
            return any(": booting on" in line for line in _lines(progress))
        needle = moment.trigger.split(": ", 1)[1]
        return any(needle in line for line in _lines(run / "service" / CONFIG / "node0.log"))
    if moment.phase == "round":
        conc, repeat = moment.round
        raw = run / "raw" / CONFIG / f"c{conc}-r{repeat}.jsonl"
        return raw.exists() and len(_lines(raw)) >= moment.after_requests
    if moment.phase in ("log scan", "teardown"):
        return any(f"{CONFIG} {moment.phase} |" in line for line in _lines(progress))
    name = moment.trigger.split()[0]
    return (run / name).exists()


def phase_seen(run: Path) -> str:
    """Where the run stood, from its folder: the last progress.log line, in a word."""
    if (run / "summary.csv").exists() or (run / "benchmark.json").exists():
        return "report"
    lines = _lines(run / "progress.log")
    if not lines:
        return "start"
    last = lines[-1]
    if " teardown |" in last:
        return "teardown"
    if " log scan |" in last:
        return "log scan"
    if m := re.search(r"C=(\d+): round (\d+)/\d+ (started|\d+/\d+ done)", last):
        where = "in" if m.group(3) == "started" else "after"
        return f"round ({where} c{m.group(1)} r{m.group(2)})"
    if "booting" in last or "startup" in last or "healthy after" in last:
        return "boot"
    return "between"


# -- one case --------------------------------------------------------------------------------------


@dataclass
class Backend:
    """Where a case's ranks run: the sweep text for a case, extra pytest args, and what is
    left of a run on every host (one line per process, container or namespace)."""

    name: str
    matrix: Callable[[int, Path], str]  # (case index, case folder) -> ppsweep.toml text
    leftovers: Callable[[str, int], list[str]]  # (run id, case index) -> what is left
    clean: Callable[[str], object]  # remove what a run left (after the checks)
    args: tuple[str, ...] = ()


def local_backend() -> Backend:
    """The emulator on this machine: case ``i`` on 127.0.47.<i+1>, ports 44500 + 4i …"""

    def matrix(i: int, folder: Path) -> str:
        profile = one_gpu_profile(folder / "tiny-1gpu.toml")
        port = PORT_BASE + 4 * i
        assert port + 1 < 45000, "port range of the interrupt cases exhausted"
        return MATRIX.format(model="/models/tiny", cluster="one", requests=NUM_REQUESTS,
                             repeats=REPEATS) + LOCAL_CLUSTER.format(
            cluster="one", host=f"{NET}.{i % 254 + 1}", port=port, dist=port + 1,
            scale=TIME_SCALE, state=folder / "state", profile=profile)

    def leftovers(run_id: str, i: int) -> list[str]:
        port = PORT_BASE + 4 * i
        left = [f"process {pid}: {_cmd(pid)}" for pid in find_local(run_id)]
        left += [f"listener on {ls.address}:{port + k} (pid {ls.pid})"
                 for k in (0, 1) for ls in listeners(port + k, f"{NET}.{i % 254 + 1}")]
        return left

    return Backend("emulator", matrix, leftovers, reap_local)


def _cmd(pid: int) -> str:
    try:
        return cmdline(Path(f"/proc/{pid}"))[:200]
    except OSError:
        return "?"


def netns() -> set[str]:
    """Named network namespaces of this machine."""
    with contextlib.suppress(OSError):
        return set(os.listdir("/run/netns"))
    return set()


@dataclass
class Case:
    """One interrupted run and what was found after it."""

    moment: Moment
    backend: str
    run_id: str
    seen: str = ""  # phase_seen at the signal
    rc: int | None = None
    left_after_kill: int = 0  # SIGKILL: ranks the killed run left (the resume stops them)
    leftovers: list[str] = field(default_factory=list)
    present: int = 0  # finished rounds in the run folder after the interrupt
    problems: list[str] = field(default_factory=list)
    resumed: str = "not run"  # "ok", "not run" or what went wrong
    resumed_rounds: int = 0
    seconds: float = 0.0
    output: str = ""

    @property
    def ok(self) -> bool:
        return not self.leftovers and not self.problems and self.resumed in ("ok", "not run")

    def row(self) -> list[str]:
        left = "0" if not self.leftovers else f"{len(self.leftovers)}: {self.leftovers[0]}"
        if self.moment.signal == "SIGKILL":
            left += f" (after resume; {self.left_after_kill} rank(s) left by the kill, reaped)"
        resumed = self.resumed
        if resumed == "ok":
            resumed = f"ok ({self.resumed_rounds}/{len(ROUNDS)})"
        return [str(self.moment.index), self.moment.describe(), self.seen, self.moment.signal,
                self.backend, left, f"{self.present}/{len(ROUNDS)}", resumed,
                "; ".join(self.problems) or "none"]


HEAD = ["#", "moment (trigger + seeded delay)", "phase seen", "signal", "backend", "leftovers",
        "rounds present/expected", "resumed OK", "problems"]


def _pytest(folder: Path, reports: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", str(folder), "--ppsweep-reports", str(reports),
            "-p", "no:cacheprovider", "-q", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def make_folder(backend: Backend, i: int, root: Path) -> Path:
    folder = root / f"case{i}"
    (folder / "sweep").mkdir(parents=True, exist_ok=True)
    (folder / "sweep" / "ppsweep.toml").write_text(backend.matrix(i, folder))
    (folder / "sweep" / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    return folder


def run_case(backend: Backend, moment: Moment, root: Path, *, resume: bool | None = None,
             slot: int | None = None) -> Case:
    """Run one case in ``root/case<slot>`` (``slot`` picks its addresses and ports; default the
    moment's index): start, trigger, signal, wait, check; SIGKILL (and ``resume=True``) cases
    are resumed and checked again."""
    i = moment.index if slot is None else slot
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # started as a background job: SIGINT ignored, and the sweeps would inherit it; the
        # Ctrl-C cases need Python's default back (tests/conftest.py says more)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    run_id = f"intr-{backend.name}-{i}-{os.getpid()}"
    case = Case(moment, backend.name, run_id)
    folder = make_folder(backend, i, root)
    reports = folder / "reports"
    run = reports / run_id
    ns_before = netns()
    t0 = time.monotonic()
    log = (folder / "pytest.out").open("wb")
    proc = subprocess.Popen(_pytest(folder / "sweep", reports, "--ppsweep-run-id", run_id,
                                    *backend.args),
                            cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=_env(),
                            start_new_session=True)  # its own group, as a terminal's job
    try:
        deadline = time.monotonic() + TRIGGER_TIMEOUT_S
        while not triggered(moment, run):
            if proc.poll() is not None:
                case.problems.append(f"the run ended (rc {proc.returncode}) before the trigger")
                break
            if time.monotonic() > deadline:
                case.problems.append(f"no trigger within {TRIGGER_TIMEOUT_S:g} s")
                break
            time.sleep(0.002)
        else:
            time.sleep(moment.delay_s)  # the seeded extra delay after the observed event
            case.seen = phase_seen(run) if proc.poll() is None else "ended"
            if proc.poll() is not None:
                case.problems.append(f"the run ended (rc {proc.returncode}) during the delay")
            elif moment.signal == "SIGINT":
                os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's whole job
            else:
                os.kill(proc.pid, getattr(signal, moment.signal))
        try:
            case.rc = proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            case.problems.append(f"pytest still running {EXIT_TIMEOUT_S:g} s after the signal")
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    case.output = (folder / "pytest.out").read_text(errors="replace")
    if moment.signal != "SIGKILL" and case.rc == 0 and not case.problems:
        case.problems.append("exit code 0 after the interrupt")
    if moment.signal == "SIGKILL":
        # The pytest process is gone, and whatever it did not stop is still there: what the
        # resume must clean up. Its own children in its group (none expected) are not ranks.
        case.left_after_kill = sum(not x.startswith("listener")
                                   for x in backend.leftovers(run_id, i))
    else:
        case.leftovers = backend.leftovers(run_id, i) + _group_left(proc.pid)
        case.leftovers += [f"network namespace {n}" for n in sorted(netns() - ns_before)]
    finished, problems = rounds_in(run)
    case.present = len(finished)
    case.problems += problems
    report_phase = moment.phase == "report" and moment.signal != "SIGKILL"
    if report_phase and not (run / "report.html").exists():
        # a stop signal once every rank is down waits for the report (session.defer_signals)
        case.problems.append(f"no report.html after {moment.signal} in the report phase")
    case.problems += _done_events_kept(run, finished)
    if resume is None:
        resume = moment.signal == "SIGKILL"
    try:
        if resume and not any(p.startswith(("no trigger", "the run ended"))
                              for p in case.problems):
            _resume(case, backend, folder, reports, run, finished, i, ns_before)
        elif moment.signal == "SIGKILL":
            case.leftovers = [f"left by the kill, not resumed: {x}"
                              for x in backend.leftovers(run_id, i)]
    finally:
        backend.clean(run_id)  # whatever a failed case left must not break the next one
    case.seconds = time.monotonic() - t0
    return case


def _group_left(pgid: int) -> list[str]:
    """Processes still alive in the interrupted pytest's process group (its helpers). A helper
    that got the signal with pytest may still be exiting when pytest is gone: the group is
    watched for a bounded while before what is left counts. Zombies are dead processes whose
    exit status nobody collected yet (pytest, their parent, is gone): they hold nothing."""
    def alive() -> list[str]:
        left = []
        for entry in proc_entries():
            try:
                if os.getpgid(int(entry.name)) == pgid and state(entry) not in ("Z", "X"):
                    left.append(f"process {entry.name} of pytest's group "
                                f"(state {state(entry)}): {cmdline(entry)[:200]}")
            except (OSError, ProcessLookupError, ValueError):
                continue
        return left

    with contextlib.suppress(AssertionError):
        wait_until(lambda: not alive(), timeout_s=GROUP_EXIT_S, what="pytest's group to exit")
    return alive()


def rounds_in(run: Path) -> tuple[set[tuple[str, int, int]], list[str]]:
    """The finished rounds of a run folder (results.csv rows) and what is wrong with them: a
    round twice, a torn row, a row whose raw file does not hold its requests."""
    problems: list[str] = []
    path = run / "results.csv"
    if not path.exists():
        return set(), problems
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        problems.append("results.csv ends in a torn row")
    rows = list(csv.DictReader(text.splitlines()))
    keys = Counter((r["config_id"], int(r["concurrency"]), int(r["repeat"])) for r in rows)
    problems += [f"round {k} present {n} times" for k, n in keys.items() if n > 1]
    for r in rows:
        raw = run / "raw" / r["config_id"] / f"c{r['concurrency']}-r{r['repeat']}.jsonl"
        n = len(_lines(raw))
        if n != int(r["num_requests"]):
            problems.append(f"raw {raw.name}: {n} request lines, row says {r['num_requests']}")
    return set(keys), problems


def _done_events_kept(run: Path, finished: set[tuple[str, int, int]]) -> list[str]:
    """Every round progress.log says finished is in results.csv (none lost)."""
    lost = []
    for line in _lines(run / "progress.log"):
        m = re.search(r"\] (\S+) C=(\d+): round (\d+)/\d+ \d+/\d+ done", line)
        if m and (m.group(1), int(m.group(2)), int(m.group(3))) not in finished:
            lost.append(f"round c{m.group(2)} r{m.group(3)} finished but not in results.csv")
    return lost


def _resume(case: Case, backend: Backend, folder: Path, reports: Path, run: Path,
            before: set[tuple[str, int, int]], i: int, ns_before: set[str]) -> None:
    kept = (run / "results.csv").read_text() if (run / "results.csv").exists() else ""
    try:
        done = subprocess.run(
            _pytest(folder / "sweep", reports, "--ppsweep-resume", str(run), *backend.args),
            cwd=folder, capture_output=True, text=True, env=_env(), timeout=300, check=False)
    except subprocess.TimeoutExpired:
        case.resumed = "resume still running after 300 s"
        return
    out = done.stdout + done.stderr
    case.output += "\n--- resume ---\n" + out
    finished, problems = rounds_in(run)
    case.resumed_rounds = len(finished)
    wrong = list(problems)
    if done.returncode != 0:
        wrong.append(f"resume exit code {done.returncode}")
    if finished != set(ROUNDS):
        wrong.append(f"rounds after resume {sorted(finished)}")
    if not before <= finished:
        wrong.append("a round kept before the resume is gone")
    now = (run / "results.csv").read_text() if (run / "results.csv").exists() else ""
    kept_rows = [ln for ln in kept.splitlines()[1:] if ln]
    if kept.endswith("\n") and not all(ln in now.splitlines() for ln in kept_rows):
        wrong.append("a kept results.csv row was changed")
    case.leftovers = backend.leftovers(case.run_id, i)
    case.leftovers += [f"network namespace {n}" for n in sorted(netns() - ns_before)]
    case.resumed = "ok" if not wrong else "; ".join(wrong)


def run_cases(backend: Backend, chosen: list[Moment], root: Path,
              resume_all: bool = False) -> list[Case]:
    """The cases one after the other (each on its own addresses and ports)."""
    return [run_case(backend, m, root, resume=True if resume_all else None) for m in chosen]


def table(cases: list[Case]) -> str:
    """The docs/RELIABILITY.md "Interrupts" table."""
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in case.row()) + " |"
            for case in cases]
    return "\n".join(out)


def totals(cases: list[Case]) -> str:
    """One line: cases per backend and signal, and how many were clean."""
    by: Counter[tuple[str, str]] = Counter((c.backend, c.moment.signal) for c in cases)
    parts = [f"{b} {s}: {n}" for (b, s), n in sorted(by.items())]
    bad = [c for c in cases if not c.ok]
    phases = Counter(c.moment.phase for c in cases)
    return (f"{len(cases)} cases ({', '.join(parts)}); phases "
            f"{', '.join(f'{p} {phases[p]}' for p in PHASES)}; "
            f"clean: {len(cases) - len(bad)}/{len(cases)}")


# -- Docker over SSH on the namespace test hosts ---------------------------------------------------

DOCKER_CLUSTER = """
[clusters.{cluster}]
kind = "ssh"
launcher = "docker"
hosts = [{{ name = "{name}", address = "{address}" }}]
gpus_per_node = 1
server_module = "pytest_ppsweep.sim"
python = "python3"
port = {port}
dist_init_port = {dist}
ssh_user = "root"
ssh_key = "{key}"
known_hosts = "{known}"
nvidia_smi = ["env", "PPSWEEP_SIM_STATE_DIR={state}", "{python}", "-m", \
"pytest_ppsweep.sim.smi", "--host", "{{host}}"]
env = {{ PPSWEEP_SIM_TIME_SCALE = "{scale}", PPSWEEP_SIM_STATE_DIR = "{state}", \
PPSWEEP_SIM_PROFILE = "{profile}" }}
shm_size = "1g"
mounts = ["{state}"]
"""


def docker_backend(hosts: object, image: str, host_index: int = 0) -> Backend:
    """One rank container on one namespace host (``support.remote.TestHosts``), reached with
    the docker SDK over ssh://, the image of scripts/build_sim_image.sh. The profile lives in
    the GPU-state folder, which is mounted into the container at the same path."""
    import docker
    from support.remote import TestHosts, rank_processes

    from pytest_ppsweep.cluster.labels import RUN_ENV, RUN_LABEL

    assert isinstance(hosts, TestHosts)
    name, address = hosts.hosts[host_index]

    def matrix(i: int, folder: Path) -> str:
        state = folder / "state"
        state.mkdir(parents=True, exist_ok=True)
        (folder / "model").mkdir(exist_ok=True)
        (folder / "model" / "config.json").write_text("{}")
        profile = one_gpu_profile(state / "tiny-1gpu.toml")
        port = PORT_BASE + 4 * i
        return MATRIX.format(model=folder / "model", cluster="ns", requests=NUM_REQUESTS,
                             repeats=REPEATS) + DOCKER_CLUSTER.format(
            cluster="ns", name=name, address=address, port=port, dist=port + 1,
            key=hosts.ssh_key, known=hosts.known_hosts, state=state, python=sys.executable,
            scale=TIME_SCALE, profile=profile)

    def _containers(run_id: str) -> list[tuple[str, object]]:
        found = []
        for host, sock in hosts.sockets.items():
            client = docker.DockerClient(base_url=sock, version="1.41")
            try:
                for c in client.containers.list(all=True,
                                                filters={"label": f"{RUN_LABEL}={run_id}"}):
                    found.append((host, c))
            finally:
                client.close()
        return found

    def _processes(run_id: str) -> list[str]:
        out = []
        for p in rank_processes(hosts):
            with contextlib.suppress(OSError):
                env = Path(f"/proc/{p.pid}/environ").read_bytes().split(b"\0")
                if f"{RUN_ENV}={run_id}".encode() in env:
                    out.append(f"process {p.pid} (host pid {p.host_pid}): {p.cmd[:150]}")
        return out

    def leftovers(run_id: str, i: int) -> list[str]:
        left = [f"{h}: container {getattr(c, 'name', c)} ({getattr(c, 'status', '?')})"
                for h, c in _containers(run_id)]
        return left + _processes(run_id)

    def clean(run_id: str) -> None:
        for _, c in _containers(run_id):
            with contextlib.suppress(Exception):
                c.remove(force=True)  # type: ignore[attr-defined]

    return Backend("docker over ssh", matrix, leftovers, clean, ("--ppsweep-image", image))
