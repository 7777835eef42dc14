"""Slurm clusters: one allocation for the whole sweep, one job step per layout.

Driven only through Slurm's commands (``salloc``, ``srun``, ``scontrol``, ``squeue``,
``scancel``): no library, so the Slurm version of the site does not matter. They run on this
host when it is a Slurm client (``SLURM_CONF`` as usual), or on the cluster's ``login`` node over
SSH (:class:`Commands`: the ssh layer of :mod:`~pytest_ppsweep.cluster.ssh`, with the cluster's
``ssh_*`` keys); a long-running one (``salloc``, a layout's ``srun``) is a
:class:`SlurmProcess` either way.

* :func:`resolve` takes the allocation (``jobid``/``--ppsweep-slurm-jobid``) or makes one
  (``salloc --no-shell``: partition, account, time, nodes, GPUs per node, extra options) and
  returns the cluster with its nodes filled in from ``scontrol show hostnames`` (node 0 hosts the
  rendezvous). Until ``salloc`` is granted, any way out (a timeout, Ctrl-C, SIGTERM/SIGHUP)
  withdraws the request: salloc stopped, the job cancelled by its name, proof that the queue
  lists nothing of it. An allocation this run made is an :class:`Allocation` kept in the run's
  registry: closing the registry (end of run, failure, Ctrl-C/SIGTERM/SIGHUP, interpreter exit)
  cancels it.
  Its job name and comment carry the run id, so the next run's reaper finds it after a SIGKILL.
* :class:`SlurmNodeHost` runs a short command on one node as a one-task step
  (``srun --overlap --jobid J --nodes 1 --ntasks 1 --nodelist <node>``): preflight, node info,
  nvidia-smi, the label sweep of :mod:`~pytest_ppsweep.cluster.reap` all work through it.
* :class:`SlurmLauncher` starts one step per layout:
  ``srun --overlap --jobid J --nodes N --ntasks-per-node 1 --nodelist <nodes> --label``. The
  service asks for one rank at a time; the launcher gathers a layout's ranks and starts the step
  when the last one is asked for. Each task picks its rank by ``SLURM_NODEID``; the per-rank
  commands (with their environment, secrets included) travel in the step's environment
  (``PPSWEEP_STEP_SCRIPT``), never on a command line that ``ps`` or ``scontrol`` would show.
  Every task's output comes back through ``srun --label`` and is split into that rank's log as
  it arrives. Stopping: ``scancel --signal TERM`` of the step, ``scancel --signal KILL`` after
  the grace, then proof from ``squeue --steps`` that the step is gone.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pytest_ppsweep.cluster.base import ClusterStop, CommandResult, HostError, RankHandle
from pytest_ppsweep.cluster.labels import (
    CONFIG_ENV,
    CONFIG_LABEL,
    NODE_RANK_LABEL,
    RUN_ENV,
    RUN_LABEL,
    labels_env,
)
from pytest_ppsweep.matrix.model import Cluster, Host
from pytest_ppsweep.matrix.slurmsettings import SlurmSettings, with_slurm

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.rankspec import RankSpec
    from pytest_ppsweep.cluster.registry import Registry
    from pytest_ppsweep.cluster.ssh import SshHost

__all__ = [
    "JOB_PREFIX",
    "KILLED",
    "Allocation",
    "Commands",
    "SlurmError",
    "SlurmLauncher",
    "SlurmNodeHost",
    "SlurmStep",
    "cancel",
    "check_pyxis",
    "cluster_of",
    "commands",
    "find_jobs",
    "job_name",
    "resolve",
    "run_of",
    "salloc_argv",
    "srun_step_argv",
    "step_script",
    "steps_of",
]

JOB_PREFIX = "ppsweep-"  # every job and step this plugin starts is named ppsweep-<run id>[…]
CMD_STEP = JOB_PREFIX + "cmd"  # the name of a node's short-command step (SlurmNodeHost)
KILLED = -9  # a task that ended without reporting its status (its step was cancelled)
SCRIPT_ENV = "PPSWEEP_STEP_SCRIPT"
JOBID_ENV = "PPSWEEP_SLURM_JOBID_"  # + cluster name: the controller's allocation, for workers
_EXIT_MARK = "PPSWEEP-TASK-EXIT"
_TASK_EXIT = re.compile(
    r"^srun: error: \S+: tasks? [0-9,\-]+: (Exited with exit code \d+|Killed|Terminated)\n?",
    re.M,
)
_LABELLED = re.compile(rb"^\s*(\d+): ?(.*)$", re.S)


class SlurmError(HostError):
    """A Slurm command failed (the message names the command, cluster and what it said)."""


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "none"


def job_name(run_id: str, *parts: str) -> str:
    """``ppsweep-<run id>[+<part>…]``: the name of the run's allocation and of its steps."""
    return "+".join([JOB_PREFIX + _safe(run_id), *(_safe(p) for p in parts)])


def cluster_of(name: str) -> str:
    """The cluster an allocation's name ``ppsweep-<run id>+<cluster>`` carries ("" for none)."""
    parts = name.split("+")
    return parts[1] if len(parts) == 2 and name.startswith(JOB_PREFIX) else ""


def run_of(name: str) -> str:
    """The run id a job or step name carries ("" for none of ours, and for command steps)."""
    if not name.startswith(JOB_PREFIX) or name == CMD_STEP:
        return ""
    return name[len(JOB_PREFIX):].split("+", 1)[0]


class SlurmProcess:
    """A long-running Slurm command (``salloc``, a layout's ``srun``): its output (stdout and
    stderr together) as lines of bytes, its exit status, and a signal to stop it."""

    stdout: Iterable[bytes]

    def poll(self) -> int | None:
        raise NotImplementedError

    def wait(self, timeout: float) -> int:
        """The exit status; subprocess.TimeoutExpired when it still runs after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (rc := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("slurm", timeout)
            time.sleep(0.05)
        return rc

    def kill(self, sig: str) -> None:
        """Send signal ``sig`` ("TERM", "KILL") to the command (a no-op once it has ended)."""
        raise NotImplementedError


class _LocalProcess(SlurmProcess):
    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True,
        )
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout

    def poll(self) -> int | None:
        return self.proc.poll()

    def kill(self, sig: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, getattr(signal, "SIG" + sig))


class _RemoteProcess(SlurmProcess):
    """The command on the login node over one SSH channel. ``env`` (one variable: the step's
    script) reaches it on the channel's standard input, read by the remote shell, never on a
    command line; its pid
    is the first line the channel returns, so that it can be signalled."""

    def __init__(self, host: SshHost, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.host = host
        if len(env) > 1:
            raise ValueError("one variable travels on standard input")
        reads = "".join(f'{k}="$(cat)"; export {k}; ' for k in env)
        chan = host.transport().open_session()
        chan.set_combine_stderr(True)
        chan.exec_command(f"echo $$; {reads}exec {shlex.join(argv)} < /dev/null 2>&1")
        chan.sendall("".join(env.values()).encode())
        chan.shutdown_write()
        self.chan = chan
        out = chan.makefile("rb")
        first = out.readline().strip()
        self.stdout = out
        self.pid = int(first) if first.isdigit() else 0

    def poll(self) -> int | None:
        if not self.chan.exit_status_ready():
            return None
        return int(self.chan.recv_exit_status())

    def kill(self, sig: str) -> None:
        if self.pid and self.poll() is None:
            self.host.run(["kill", f"-{sig}", str(self.pid)], timeout=30, sudo=False)


class Commands:
    """Where Slurm's commands run: this host (a Slurm client), or the cluster's login node
    reached over SSH (``login``, with the cluster's ssh_* keys)."""

    def __init__(self, host: SshHost | None = None) -> None:
        self.host = host

    @property
    def where(self) -> str:
        return "this host" if self.host is None else f"login node {self.host.address}"

    def run(self, argv: Sequence[str], timeout: float, what: str) -> CommandResult:
        """Run a short Slurm command; a missing command or a timeout is a SlurmError."""
        if self.host is not None:
            try:
                res = self.host.run(argv, timeout=timeout, sudo=False)
            except HostError as exc:
                raise SlurmError(f"{what}: {exc}") from None
            if res.exit_status == 127 and re.search(
                    rf"\b{re.escape(argv[0])}: (command )?not found", res.stderr):
                raise SlurmError(f"{what}: {argv[0]!r} not found on {self.where}: it must be a "
                                 "Slurm client (salloc, srun, scontrol, squeue, scancel on PATH)")
            return res
        try:
            proc = subprocess.run(
                list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise SlurmError(
                f"{what}: {argv[0]!r} not found: this host must be a Slurm client (salloc, srun, "
                "scontrol, squeue, scancel on PATH), or give the cluster a 'login' node"
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{what}: {shlex.join(argv)} did not finish within {timeout:.0f} s"
                             ) from None
        return CommandResult("slurm", tuple(argv), proc.returncode, proc.stdout, proc.stderr)

    def start(self, argv: Sequence[str], what: str, env: Mapping[str, str] | None = None
              ) -> SlurmProcess:
        """Start a long-running Slurm command; ``env`` is added to its environment."""
        try:
            if self.host is not None:
                return _RemoteProcess(self.host, argv, env or {})
            return _LocalProcess(argv, env or {})
        except (OSError, HostError, EOFError) as exc:
            raise SlurmError(f"{what}: cannot start {argv[0]} on {self.where}: {exc}") from None

    def checked(self, argv: Sequence[str], timeout: float, what: str) -> str:
        res = self.run(argv, timeout, what)
        if not res.ok:
            raise SlurmError(
                f"{what}: {shlex.join(argv)} exited {res.exit_status}: "
                f"{(res.stderr or res.stdout).strip()[:400]}"
            )
        return res.stdout


_LOCAL = Commands()
_LOGINS: dict[tuple[str, object], Commands] = {}
_LOGINS_LOCK = threading.Lock()


def commands(cluster: Cluster) -> Commands:
    """Where ``cluster``'s Slurm commands run (one SSH connection per login node and
    settings, kept for the process's life)."""
    own = SlurmSettings.of(cluster)
    if not own.login:
        return _LOCAL
    from pytest_ppsweep.cluster.ssh import SshHost, SshSettings

    settings = SshSettings.from_cluster(cluster)
    key = (own.login, settings)
    with _LOGINS_LOCK:
        if key not in _LOGINS:
            _LOGINS[key] = Commands(SshHost("login", own.login, settings))
        return _LOGINS[key]


# -- the allocation -------------------------------------------------------------------------------


def gpu_options(cluster: Cluster) -> list[str]:
    """The GPUs the allocation and each step ask for: ``--gres`` (key ``gres``), else
    ``--gpus-per-node <gpus_per_node>`` (``request_gpus = false``: none)."""
    own = SlurmSettings.of(cluster)
    if own.gres:
        return ["--gres", own.gres]
    if own.request_gpus:
        return ["--gpus-per-node", str(cluster.gpus_per_node)]
    return []


def salloc_argv(cluster: Cluster, name: str, comment: str,
                exclude: Sequence[str] = ()) -> list[str]:
    """The ``salloc`` that makes the run's allocation (held until scancel: ``--no-shell``):
    one task per node, ``--exclusive``, ``--cpus-per-task``, ``--mem`` and the GPUs as the
    cluster's keys say (defaults: whole nodes, all their memory, ``gpus_per_node`` GPUs);
    ``exclude``: nodes that failed in an earlier allocation of the run."""
    own = SlurmSettings.of(cluster)
    argv = ["salloc", "--no-shell", "--job-name", name, "--comment", comment,
            "--nodes", str(len(cluster.hosts)), "--ntasks-per-node", "1"]
    if own.exclusive:
        argv.append("--exclusive")
    if own.cpus_per_task:
        argv += ["--cpus-per-task", str(own.cpus_per_task)]
    argv += ["--mem", own.mem, *gpu_options(cluster)]
    if own.partition:
        argv += ["--partition", own.partition]
    if own.account:
        argv += ["--account", own.account]
    if own.time:
        argv += ["--time", own.time]
    if exclude:
        argv += ["--exclude", ",".join(exclude)]
    return argv + list(own.salloc_options)


def step_resources(cluster: Cluster) -> list[str]:
    """What each task (one rank per node) of a layout's step asks for: ``cpus_per_task`` CPUs
    (0: every CPU the allocation holds on the node), ``--mem`` and the GPUs of the allocation.
    A step that asks nothing gets one CPU per task where Slurm binds tasks to CPUs."""
    own = SlurmSettings.of(cluster)
    cpus = own.cpus_per_task or own.node_cpus
    argv = ["--cpus-per-task", str(cpus)] if cpus else []
    return [*argv, "--mem", own.mem, *gpu_options(cluster)]


@dataclass
class Allocation:
    """A Slurm job this run holds for its steps; ``owned``: made by this run, cancelled by
    :meth:`close` (an allocation taken by jobid is left as it was). ``layouts``: how many
    layouts have started in it (a new one is never renewed for lack of time: another would
    have no more). Renewed in place (:func:`before_layout`): the registry keeps one per
    cluster."""

    cluster: str
    jobid: str
    owned: bool
    where: Commands = _LOCAL
    layouts: int = 0
    _closed: bool = False

    def renewed(self, jobid: str) -> None:
        """Now allocation ``jobid``, made by this run, its first layout starting."""
        self.jobid, self.owned, self.layouts, self._closed = jobid, True, 1, False

    def close(self) -> None:
        if self._closed or not self.owned:
            return
        self._closed = True
        self.where.run(["scancel", "--quiet", self.jobid], 30, f"cluster {self.cluster}")
        # proof: the job left the queue (a bounded wait; Slurm ends it within KillWait)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.jobid not in _queued_jobs(self.where, [self.jobid]):
                return
            time.sleep(0.2)


def _queued_jobs(where: Commands, jobids: Sequence[str]) -> set[str]:
    res = where.run(["squeue", "--noheader", "--jobs", ",".join(jobids), "--format", "%i %T"],
                    30, "squeue")
    return {line.split()[0] for line in res.stdout.splitlines()
            if line.split() and line.split()[1] not in ("COMPLETED", "CANCELLED", "FAILED")}


def _job_nodes(cluster: Cluster, jobid: str) -> list[Host]:
    what = f"cluster {cluster.name}: allocation {jobid}"
    _checked = commands(cluster).checked
    out = _checked(["squeue", "--noheader", "--jobs", jobid, "--format", "%T|%N"], 30, what)
    if not out.strip():
        raise SlurmError(f"{what}: expected a running Slurm job, found none (squeue lists "
                         "nothing: ended or never existed)")
    state, nodelist = out.strip().splitlines()[0].split("|", 1)
    if state != "RUNNING":
        raise SlurmError(f"{what}: expected a RUNNING job, found {state}")
    names = _checked(["scontrol", "show", "hostnames", nodelist], 30, what).split()
    if len(names) < len(cluster.hosts):
        raise SlurmError(
            f"{what}: expected at least {len(cluster.hosts)} node(s) (key 'nodes'), found "
            f"{len(names)}: {', '.join(names)}"
        )
    names = names[: len(cluster.hosts)]
    shown = _checked(["scontrol", "--oneliner", "show", "node", ",".join(names)], 30, what)
    addrs = dict(re.findall(r"NodeName=(\S+).*?NodeAddr=(\S+)", shown))
    return [Host(address=addrs.get(n, n), name=n) for n in names]


def resolve(cluster: Cluster, run_id: str, registry: Registry, jobid: str = "",
            reap: bool = False, timeout_s: float = 600.0) -> Cluster:
    """``cluster`` with its nodes taken from its allocation; an allocation made here is kept in
    ``registry`` (closing it releases the allocation). ``jobid`` (``--ppsweep-slurm-jobid``)
    overrides the cluster's ``jobid``; an xdist worker takes its controller's.

    Before a new allocation is asked for, an allocation named after this very run (a resumed
    run whose pytest was killed) is cancelled, and with ``reap`` (``--ppsweep-reap``) those of
    other runs too: they hold the nodes the new one waits for."""
    if cluster.kind != "slurm":
        return cluster
    jobid = jobid or SlurmSettings.of(cluster).jobid or os.environ.get(JOBID_ENV + cluster.name, "")
    if not jobid:
        where = commands(cluster)
        what = f"cluster {cluster.name}"
        name = job_name(run_id, cluster.name)  # two clusters of one run: two allocations
        for old, old_name, _state in find_jobs(where):
            if old_name == name or reap:
                problems = cancel(where, old,
                                  f"{what}: allocation {old} ({old_name}) of an earlier run")
                if problems:
                    raise SlurmError("; ".join(problems))
        jobid = _allocate(where, salloc_argv(cluster, name, f"ppsweep run {run_id}"), name,
                          timeout_s, what)
        registry.shared(("slurm-allocation", cluster.name), lambda: Allocation(
            cluster.name, jobid, owned=True, where=where))
        os.environ[JOBID_ENV + cluster.name] = jobid  # xdist workers take this allocation
    else:  # the user's (or the controller's): kept track of, never cancelled
        registry.shared(("slurm-allocation", cluster.name), lambda: Allocation(
            cluster.name, jobid, owned=False, where=commands(cluster)))
    return _with_nodes(cluster, jobid)


def _with_nodes(cluster: Cluster, jobid: str) -> Cluster:
    """``cluster`` on the nodes of allocation ``jobid``, with the CPUs it holds per node."""
    hosts = _job_nodes(cluster, jobid)
    held = allotted(commands(cluster), jobid)
    cpus = min((held[h.name].cpus for h in hosts if h.name in held), default=0)
    return replace(with_allocation(cluster, jobid, cpus), hosts=tuple(hosts))


def with_allocation(cluster: Cluster, jobid: str, node_cpus: int | None = None) -> Cluster:
    """``cluster`` taking allocation ``jobid`` (its settings' ``jobid``), and the CPUs it holds
    per node when known (``node_cpus``; None: as they were)."""
    if node_cpus is None:
        return with_slurm(cluster, jobid=jobid)
    return with_slurm(cluster, jobid=jobid, node_cpus=node_cpus)


def _allocate(where: Commands, argv: Sequence[str], name: str, timeout_s: float, what: str
              ) -> str:
    """The job id ``salloc`` was granted. Until it is granted the request is withdrawn on any
    way out (salloc gives up, a timeout, Ctrl-C, or SIGTERM/SIGHUP turned into one): salloc is
    told to stop, the job is cancelled by its name, and the queue is checked to list nothing of
    that name, so no allocation is granted after the run has gone."""
    proc = where.start(argv, what)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True,
                              name="ppsweep-salloc")
    reader.start()
    try:
        rc = proc.wait(timeout_s)
    except BaseException as exc:
        _withdraw(where, proc, name, what)
        if isinstance(exc, subprocess.TimeoutExpired):
            others = [f"{j} ({n}, {st.lower()})" for j, n, st in find_jobs(where)]
            hint = (f"; allocations of earlier ppsweep runs still queued: {', '.join(others)} "
                    "(cancel them with --ppsweep-reap)") if others else ""
            raise SlurmError(f"{what}: {shlex.join(argv)} did not finish within "
                             f"{timeout_s:.0f} s: the allocation was not granted{hint}") from None
        raise
    reader.join(timeout=10)
    text = b"".join(out).decode(errors="replace")
    found = re.search(r"Granted job allocation (\d+)", text)
    if rc != 0 or not found:
        _withdraw(where, proc, name, what)
        raise SlurmError(f"{what}: {shlex.join(argv)} exited {rc} on {where.where}: "
                         f"{text.strip()[:400]}")
    return found.group(1)


def _withdraw(where: Commands, proc: SlurmProcess, name: str, what: str) -> None:
    """A request not (yet) granted: salloc stopped (it revokes a pending request itself), the
    job cancelled by its name in any case, then proof that the queue no longer lists it."""
    with contextlib.suppress(HostError):
        proc.kill("TERM")
    deadline = time.monotonic() + 30
    while True:
        where.run(["scancel", "--quiet", "--name", name], 30, what)
        if not any(n == name for _j, n, _st in find_jobs(where)):
            return
        if time.monotonic() > deadline:
            raise SlurmError(f"{what}: the allocation request {name} is still queued 30 s after "
                             "scancel --name")
        time.sleep(0.2)


def find_jobs(where: Commands) -> list[tuple[str, str, str]]:
    """(jobid, name, state) of every job of this user named ``ppsweep-…`` in the queue."""
    res = where.run(["squeue", "--noheader", "--me", "--format", "%i|%j|%T"], 30, "squeue")
    out = []
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and run_of(parts[1]):
            out.append((parts[0], parts[1], parts[2]))
    return out


def steps_of(where: Commands, jobid: str) -> list[tuple[str, str]]:
    """(step id, step name) of every step of ``jobid`` still running."""
    res = where.run(["squeue", "--noheader", "--steps", "--jobs", jobid, "--format", "%i|%j"], 30,
                 "squeue")
    return [tuple(line.strip().split("|", 1)) for line in res.stdout.splitlines()  # type: ignore[misc]
            if "|" in line and not line.strip().endswith(".extern")]


# -- a node's short commands ----------------------------------------------------------------------


def _srun_base(cluster: Cluster, name: str) -> list[str]:
    return ["srun", "--overlap", "--jobid", SlurmSettings.of(cluster).jobid, "--job-name", name,
            "--export", "ALL", "--quiet"]


def container_args(cluster: Cluster) -> list[str]:
    """Pyxis' options of a step in ``container_image``; [] without: the image each node imported
    once (import_image), the engine's own command, not the image's entrypoint, the user's home
    kept out of the container (as srt-slurm runs the same engine), and the mounts."""
    if not SlurmSettings.of(cluster).container_image:
        return []
    argv = ["--container-image", image_file(cluster), "--no-container-entrypoint",
            "--no-container-mount-home"]
    if cluster.mounts:
        argv += ["--container-mounts", ",".join(cluster.mounts)]
    return argv


class SlurmNodeHost:
    """One node of the allocation: short commands run as a one-task step on it; with
    ``in_image``, in the cluster's ``container_image`` as the ranks' steps (Pyxis)."""

    def __init__(self, cluster: Cluster, host: Host, in_image: bool = False) -> None:
        self.cluster = cluster
        self.name = host.name
        self.address = host.address
        self.in_image = in_image

    def argv(self, argv: Sequence[str]) -> list[str]:
        image = container_args(self.cluster) if self.in_image else []
        return [*_srun_base(self.cluster, CMD_STEP), "--nodes", "1", "--ntasks", "1", "--nodelist",
                self.name, *image, *argv]

    def run(self, argv: Sequence[str], timeout: float = 60.0) -> CommandResult:
        if not SlurmSettings.of(self.cluster).jobid:
            raise HostError(f"host {self.name}: cluster {self.cluster.name} has no allocation")
        res = commands(self.cluster).run(self.argv(argv), timeout, f"host {self.name} (as a "
                                         "Slurm step)")
        # srun reports the task's own non-zero exit on stderr too: that is the command's result;
        # any other "srun: error" means the step itself could not run (allocation gone…)
        stderr = _TASK_EXIT.sub("", res.stderr)
        if res.exit_status != 0 and "srun: error" in stderr:
            raise HostError(f"host {self.name}: srun failed: {stderr.strip()[:400]}")
        return CommandResult(self.name, tuple(argv), res.exit_status, res.stdout, stderr)

    def fetch_all(self, folder: str, names: Sequence[str], local: Path,
                  timeout: float = 300.0) -> None:
        """Copy files of ``folder`` on the node into ``local`` (profile traces): one step
        sends them all as a base64 tar; only the named regular files are written."""
        script = 'd=$1; shift; tar -C "$d" -cf - -- "$@" | base64 -w0'
        res = self.run(["sh", "-c", script, "ppsweep-fetch", folder, *names], timeout)
        if not res.ok:
            raise HostError(f"host {self.name}: cannot read {folder}: "
                            f"{(res.stderr or res.stdout).strip()[:300]}")
        try:
            data = base64.b64decode(res.stdout.strip(), validate=True)
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for member in tar.getmembers():
                    body = tar.extractfile(member) if member.isfile() else None
                    if body is not None and member.name in names:
                        (local / member.name).write_bytes(body.read())
        except (ValueError, tarfile.TarError):
            raise HostError(f"host {self.name}: the files of {folder} did not come back "
                            "whole") from None
        missing = [n for n in names if not (local / n).is_file()]
        if missing:
            raise HostError(f"host {self.name}: {', '.join(missing)} not read from {folder}")


# -- one step per layout --------------------------------------------------------------------------


def step_script(specs: Sequence[RankSpec], labels: Sequence[Mapping[str, str]]) -> str:
    """The shell text every task of the step runs: the i-th of ``specs`` (in node order) on the
    step's i-th node (its ``SLURM_NODEID``), with that rank's environment and labels; then a
    marker line with the rank's exit status. A layout's step spans all its nodes (i = node
    rank); a comm domain's spans the domain's nodes only."""
    q = shlex.quote
    cases = []
    for i, (spec, lab) in enumerate(zip(specs, labels, strict=True)):
        env = {**spec.env, **labels_env(lab)}
        cmd = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), *spec.argv])
        cases.append(f"  {i}) {cmd} < /dev/null ;;")
    return (
        'case "$SLURM_NODEID" in\n' + "\n".join(cases) + "\n"
        f"  *) echo {q('no rank for SLURM_NODEID')}=$SLURM_NODEID >&2; false ;;\n"
        f"esac\necho \"{_EXIT_MARK} $?\"\n"
    )


def srun_step_argv(cluster: Cluster, name: str, nodes: Sequence[str]) -> list[str]:
    """The ``srun`` of one layout's step: one task per node, output labelled by task, line by
    line (no ``--unbuffered``: it labels each chunk a task writes, and cuts a long line in two
    where a chunk ends; the ranks flush each line themselves)."""
    argv = [*_srun_base(cluster, name), "--nodes", str(len(nodes)), "--ntasks-per-node", "1",
            "--ntasks", str(len(nodes)), "--nodelist", ",".join(nodes), "--label",
            "--kill-on-bad-exit=0"]
    argv += step_resources(cluster)
    argv += container_args(cluster)
    argv += list(SlurmSettings.of(cluster).srun_options)
    return [*argv, "sh", "-c", f'eval "${SCRIPT_ENV}"']


class SlurmStep:
    """One running step: its srun process here, each task's log and exit status."""

    def __init__(self, cluster: Cluster, name: str, specs: Sequence[RankSpec],
                 labels: Sequence[Mapping[str, str]], logs: Sequence[Path]) -> None:
        self.cluster = cluster
        self.name = name
        self.nodes = [s.host for s in specs]
        self.run = labels[0].get(RUN_LABEL, "") if labels else ""
        self.config = labels[0].get(CONFIG_LABEL, "") if labels else ""
        self.argv = srun_step_argv(cluster, name, self.nodes)
        self.rc: dict[int, int] = {}
        self._logs: list[BinaryIO] = []
        for path in logs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._logs.append(path.open("ab", buffering=0))
        self.where = commands(cluster)
        script = step_script(specs, labels)
        try:
            self.proc = self.where.start(self.argv, f"cluster {cluster.name}",
                                         {SCRIPT_ENV: script})
        except SlurmError:
            for f in self._logs:
                f.close()
            raise
        self.stepid = ""
        self._lock = threading.Lock()
        self._stopped = False
        self._reader = threading.Thread(target=self._read, name=f"ppsweep-srun-{name}",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        other = self._logs[0]  # srun's own lines (no task label) go to node 0's log
        for raw in self.proc.stdout:
            m = _LABELLED.match(raw)
            if m and int(m.group(1)) < len(self._logs):
                task, text = int(m.group(1)), m.group(2)
                if text.startswith(_EXIT_MARK.encode()):
                    with contextlib.suppress(ValueError):
                        self.rc[task] = int(text.split()[1])
                    continue
                self._logs[task].write(text)
            else:
                other.write(raw)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        for f in self._logs:
            with contextlib.suppress(OSError):
                f.close()

    def poll(self, task: int) -> int | None:
        if task in self.rc:
            return self.rc[task]
        if self.proc.poll() is None:
            return None
        self._reader.join(timeout=5)
        return self.rc.get(task, KILLED)

    def find_stepid(self) -> str:
        if not self.stepid:
            for sid, name in steps_of(self.where, SlurmSettings.of(self.cluster).jobid):
                if name == self.name:
                    self.stepid = sid
        return self.stepid

    def stop(self, grace_s: float) -> None:
        """scancel TERM, KILL after ``grace_s``; proof that the step is gone (idempotent)."""
        with self._lock:
            if self._stopped:
                return
            what = f"cluster {self.cluster.name}: step {self.name}"
            if self.proc.poll() is None:
                deadline = time.monotonic() + 10
                while not self.find_stepid() and self.proc.poll() is None:
                    if time.monotonic() > deadline:
                        break  # srun never got a step: it is stopped below
                    time.sleep(0.1)
                for sig, wait_s in (("TERM", grace_s), ("KILL", 15.0)):
                    if self.stepid:
                        self.where.run(["scancel", "--quiet", "--signal", sig, self.stepid], 30,
                                       what)
                    elif sig == "KILL":
                        self.proc.kill("KILL")
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=wait_s)
                    if self.proc.poll() is not None:
                        break
                if self.stepid and self.proc.poll() is None:
                    # the tasks are gone but srun still waits: cancel the step outright
                    self.where.run(["scancel", "--quiet", self.stepid], 30, what)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=15)
                if self.proc.poll() is None:
                    self.proc.kill("KILL")
                    self.proc.wait(timeout=10)
            self._reader.join(timeout=10)
            # proof: Slurm no longer lists the step (its tasks have all ended)
            deadline = time.monotonic() + 30
            jobid = SlurmSettings.of(self.cluster).jobid
            while any(name == self.name for _sid, name in steps_of(self.where, jobid)):
                if time.monotonic() > deadline:
                    raise SlurmError(f"{what}: still listed by squeue --steps 30 s after SIGKILL")
                time.sleep(0.2)
            self._stopped = True
            self._sweep(what)

    def _sweep(self, what: str) -> None:
        """The nodes swept for a process that still carries this layout's labels (one that
        left the step's process tree, which Slurm no longer tracks): killed, and named."""
        if not self.run or not self.config:
            return
        argv = [*_srun_base(self.cluster, CMD_STEP), "--nodes", str(len(self.nodes)),
                "--ntasks-per-node", "1", "--ntasks", str(len(self.nodes)), "--nodelist",
                ",".join(self.nodes), "--label", "sh", "-c", _SWEEP, "ppsweep-sweep",
                f"{RUN_ENV}={self.run}", f"{CONFIG_ENV}={self.config}"]
        res = self.where.run(argv, 60, what)
        found = [line for line in res.stdout.splitlines() if "survivor" in line]
        if found:
            raise SlurmError(f"{what}: processes of the layout outlived its step (killed now): "
                             + "; ".join(found)[:600])


# $1, $2: "PPSWEEP_RUN=<run>", "PPSWEEP_CONFIG=<config>"; prints "survivor <pid> <cmd>" for
# every process carrying both (but this shell) after SIGKILL-ing it.
_SWEEP = r"""
for f in $(grep -l -s -a -F "$1" /proc/[0-9]*/environ 2>/dev/null); do
  p=${f#/proc/}; p=${p%/environ}
  [ "$p" = "$$" ] && continue
  tr '\000' '\n' < "$f" 2>/dev/null | grep -qx -F "$1" || continue
  tr '\000' '\n' < "$f" 2>/dev/null | grep -qx -F "$2" || continue
  echo "survivor $p $(tr '\000' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-120)"
  kill -KILL "$p" 2>/dev/null
done
true
"""


class SlurmRank:
    """One rank of a layout's step (the handle the service holds per node)."""

    def __init__(self, group: _Pending, node_rank: int) -> None:
        self.group = group
        self.node_rank = node_rank

    def __repr__(self) -> str:
        return f"SlurmRank({self.group.name}, node{self.node_rank})"

    @property
    def task(self) -> int:
        """The rank's task in its step (its position among the step's nodes)."""
        return sorted(self.group.specs).index(self.node_rank)

    def poll(self) -> int | None:
        step = self.group.step
        return None if step is None else step.poll(self.task)

    def stop(self, grace_s: float = 5.0) -> int | None:
        step = self.group.step
        if step is None:
            self.group.cancelled = True  # the step never starts
            return KILLED
        step.stop(grace_s)
        return step.poll(self.task)


class _Pending:
    """The ranks of one layout gathered until the last one is asked for."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.specs: dict[int, tuple[RankSpec, Mapping[str, str], Path]] = {}
        self.step: SlurmStep | None = None
        self.cancelled = False


class SlurmLauncher:
    """Starts each layout as one job step of the cluster's allocation, on all of ``cluster``'s
    nodes (the comm step's launcher gets the domain's nodes only)."""

    def __init__(self, cluster: Cluster, registry: Registry | None = None) -> None:
        self.cluster = cluster
        self.registry = registry
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], _Pending] = {}

    def start(self, spec: RankSpec, log_path: Path, labels: Mapping[str, str]) -> RankHandle:
        if not SlurmSettings.of(self.cluster).jobid:
            raise HostError(f"cluster {self.cluster.name}: no Slurm allocation to start in")
        key = (labels.get(RUN_LABEL, ""), labels.get(CONFIG_LABEL, ""))
        size = len(self.cluster.hosts)
        with self._lock:
            group = self._pending.get(key)
            if group is None or group.step is not None or spec.node_rank in group.specs:
                name = job_name(key[0] or "run", key[1] or "config", uuid.uuid4().hex[:6])
                group = self._pending[key] = _Pending(name, size)
            group.specs[spec.node_rank] = (spec, labels, log_path)
            ready = len(group.specs) == size
        if ready and not group.cancelled:
            ordered = [group.specs[r] for r in sorted(group.specs)]
            if self.registry is not None:  # Pyxis: nodes new to the run import the image once
                failed = import_image(self.cluster, [s.host for s, _l, _p in ordered],
                                      self.registry)
                if failed:
                    raise HostError(f"cluster {self.cluster.name}: " + "; ".join(failed))
            group.step = SlurmStep(
                self.cluster, group.name, [s for s, _l, _p in ordered],
                [dict(lab, **{NODE_RANK_LABEL: str(s.node_rank)}) for s, lab, _p in ordered],
                [p for _s, _l, p in ordered],
            )
        return SlurmRank(group, spec.node_rank)


def cancel(where: Commands, ident: str, what: str, grace_s: float = 5.0) -> list[str]:
    """A leftover job or step of an earlier run cancelled (TERM, KILL after ``grace_s``);
    returns what could not be removed."""
    for sig, wait_s in (("TERM", grace_s), ("KILL", 30.0)):
        where.run(["scancel", "--quiet", "--signal", sig, ident], 30, what)
        if "." not in ident:
            where.run(["scancel", "--quiet", ident], 30, what)  # a job: end the allocation
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not _listed(where, ident):
                return []
            time.sleep(0.2)
    return [f"{what}: still listed by squeue after SIGKILL"]


def _listed(where: Commands, ident: str) -> bool:
    job = ident.split(".", 1)[0]
    if "." in ident:
        return any(sid == ident for sid, _name in steps_of(where, job))
    return job in _queued_jobs(where, [job])


def check_pyxis(cluster: Cluster) -> list[str]:
    """With ``container_image``: Slurm's srun here must know ``--container-image`` (the Pyxis
    SPANK plugin adds it to ``srun --help``); [] when it does or no image is asked for."""
    own = SlurmSettings.of(cluster)
    if not own.container_image:
        return []
    res = commands(cluster).run(["srun", "--help"], 30, f"cluster {cluster.name}")
    if "--container-image" in res.stdout + res.stderr:
        return []
    return [f"container_image {own.container_image!r}: expected srun with Pyxis "
            "(--container-image in `srun --help`), found an srun without it: install the Pyxis "
            "SPANK plugin, or leave container_image out to run the nodes' own python"]



# -- what the allocation gives each rank ------------------------------------------------------


@dataclass(frozen=True)
class Allotted:
    """What an allocation holds on one node (``scontrol show job -d``): CPUs, memory in MB
    (0: no memory is allotted, the node's own counts) and GPUs (gres gpu)."""

    cpus: int
    mem_mb: int
    gpus: int


_JOB_NODES = re.compile(r"^\s*Nodes=(\S+) CPU_IDs=(\S+) Mem=(\d+)(?: GRES=(\S*))?", re.M)


def _count_ids(ids: str) -> int:
    """``0-3,8`` → 5."""
    n = 0
    for part in ids.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            n += int(hi) - int(lo) + 1 if hi.isdigit() else 1
    return n


def _gres_gpus(gres: str) -> int:
    """GPUs of a gres list ``gpu:8(IDX:0-7)``, ``gpu:h200:4(IDX:0-3),nic:1`` → 8, 4."""
    total = 0
    for item in re.split(r",(?![^()]*\))", gres):
        name, _, rest = item.partition(":")
        if name != "gpu":
            continue
        count = re.search(r"(\d+)(?:\(|$)", rest)
        total += int(count.group(1)) if count else 0
    return total


def allotted(where: Commands, jobid: str) -> dict[str, Allotted]:
    """Node name → what allocation ``jobid`` holds there (``scontrol show job -d``)."""
    what = f"allocation {jobid}"
    out = where.checked(["scontrol", "show", "job", "-d", jobid], 30, what)
    held: dict[str, Allotted] = {}
    for nodes, ids, mem, gres in _JOB_NODES.findall(out):
        names = where.checked(["scontrol", "show", "hostnames", nodes], 30, what).split()
        for name in names:
            held[name] = Allotted(_count_ids(ids), int(mem), _gres_gpus(gres or ""))
    return held


def mem_mb(size: str) -> int:
    """A Slurm memory size in MB (``200G`` → 204800; no unit: MB)."""
    unit = size[-1:].upper()
    scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    if unit in scale:
        return int(int(size[:-1]) * scale[unit])
    return int(size)


# printed by each task of the probe step: what the task itself sees
_PROBE = r"""
mem=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
gpus=$("$@" -L 2>/dev/null | grep -c '^GPU ')
echo "ppsweep-probe cpus=${SLURM_CPUS_PER_TASK:-0} nproc=$(nproc)" \
  "mem=${SLURM_MEM_PER_NODE:-0} memtotal=$mem gpus=$gpus"
"""
_PROBED = re.compile(r"ppsweep-probe cpus=(\d+) nproc=(\d+) mem=(\d+) memtotal=(\d+) gpus=(\d+)")


def resources(cluster: Cluster, smi: Callable[[str], list[str]]) -> tuple[list[str], list[str]]:
    """Each node's CPUs, memory and GPUs in the allocation and as a rank sees them (a step
    with a layout's own resources, one task per node), and the problems where a rank would get
    fewer than the sweep asks: ``cpus_per_task`` CPUs (else at least one), ``mem`` (0: any),
    ``gpus_per_node`` GPUs; ``smi``: a node's nvidia-smi command line, by its address.
    Returns (report lines, problems), each ``<node> (<address>): …``."""
    from pytest_ppsweep.cluster.ssh import on_all

    own = SlurmSettings.of(cluster)
    where = commands(cluster)
    held = allotted(where, own.jobid)
    want_cpus = own.cpus_per_task or 1
    want_mem = mem_mb(own.mem)
    want_gpus = cluster.gpus_per_node
    asks = (f"a rank asks {own.cpus_per_task or 'every'} CPU(s), "
            f"{own.mem if want_mem else 'all the'} memory, {want_gpus} GPU(s)")

    jobid = own.jobid

    def lacks(shown: str, cpus: int, mem: int, gpus: int | None, seen: str) -> list[str]:
        """What a rank asks and does not get (``seen``: where the numbers come from)."""
        problems = []
        if cpus < want_cpus:
            problems.append(f"{shown}: a rank asks {want_cpus} CPU(s) (cpus_per_task), found "
                            f"{cpus} {seen}")
        if want_mem and mem and mem < want_mem:
            problems.append(f"{shown}: a rank asks {own.mem} = {want_mem} MB (mem), "
                            f"found {mem} MB {seen}")
        if gpus is not None and gpus < want_gpus:
            problems.append(f"{shown}: a rank asks {want_gpus} GPU(s) (gpus_per_node), found "
                            f"{gpus} {seen}")
        return problems

    def probe(host: Host) -> tuple[str, list[str]]:
        shown = f"{host.name} ({host.address})"
        got = held.get(host.name)
        if got is None:
            return "", [f"{shown}: not a node of allocation {jobid} (scontrol show job -d does "
                        "not list it)"]
        allot = (f"allocation {jobid} holds {got.cpus} CPU(s), "
                 f"{f'{got.mem_mb} MB' if got.mem_mb else 'no memory limit'}, "
                 f"{got.gpus} GPU(s) (gres) there")
        # what Slurm allotted first: a step asking more would not even start
        short = lacks(shown, got.cpus, got.mem_mb, got.gpus if gpu_options(cluster) else None,
                      f"in allocation {jobid} (scontrol show job -d)")
        if short:
            return f"{shown}: {allot}", short
        # then what a rank sees in a step with a layout's own resources
        argv = [*_srun_base(cluster, CMD_STEP), "--nodes", "1", "--ntasks", "1", "--nodelist",
                host.name, *step_resources(cluster), "sh", "-c", _PROBE, "ppsweep-probe",
                *(smi(host.address) if cluster.nvidia_smi else ["false"])]
        res = where.run(argv, 60, f"cluster {cluster.name}: {shown}")
        found = _PROBED.search(res.stdout)
        if found is None:
            said = _TASK_EXIT.sub("", res.stderr).strip() or res.stdout.strip()
            step = shlex.join(step_resources(cluster))
            return f"{shown}: {allot}", [
                f"{shown}: a step with a rank's resources ({step}) cannot start in allocation "
                f"{jobid}: {said[:300]}; {allot}; {asks}"]
        cpus, nproc, mem, memtotal, gpus = (int(x) for x in found.groups())
        rank_cpus = min(cpus, nproc) if cpus else min(got.cpus or nproc, nproc)
        rank_mem = mem or got.mem_mb or memtotal
        # GPUs asked of Slurm: what the allocation holds there; else what nvidia-smi lists
        rank_gpus = got.gpus if gpu_options(cluster) else gpus
        line = (f"{shown}: a rank gets {rank_cpus} CPU(s) (nproc {nproc}), {rank_mem} MB, "
                f"{rank_gpus} GPU(s); {allot}")
        return line, lacks(shown, rank_cpus, rank_mem,
                           rank_gpus if gpu_options(cluster) or cluster.nvidia_smi else None,
                           f"in a step of allocation {jobid}" + (
                               "" if gpu_options(cluster) else
                               " (GPUs: none asked of Slurm, request_gpus = false: the node's "
                               "nvidia-smi counts)"))

    per_node = on_all(cluster.hosts, probe)
    return ([line for line, _p in per_node if line],
            [p for _line, problems in per_node for p in problems])


# -- Pyxis: the image imported once per node ---------------------------------------------------


def image_file(cluster: Cluster) -> str:
    """The squashfs a step's ``--container-image`` names: the image imported into
    ``container_cache`` on each node (an image given as a .sqsh path is used as it is)."""
    own = SlurmSettings.of(cluster)
    image = own.container_image
    if image.startswith("/") and image.endswith(".sqsh"):
        return image
    return f"{own.container_cache.rstrip('/')}/{_safe(image)}.sqsh"


# $1 the squashfs, $2 the enroot URI: imported unless there (a shared cache: another node's
# import is atomic by rename, a second import of a race is only wasted)
_IMPORT = r"""
f=$1; [ -s "$f" ] && { echo "ppsweep-image cached $f"; exit 0; }
mkdir -p "$(dirname "$f")" || exit 1
tmp="$f.$(hostname).$$.tmp"
enroot import --output "$tmp" "$2" || { rm -f "$tmp"; exit 1; }
mv -f "$tmp" "$f" && echo "ppsweep-image imported $f"
"""


class _Imported:
    """The nodes that hold the image's squashfs, in the run's registry (one per cluster)."""

    def __init__(self) -> None:
        self.nodes: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def close(self) -> None:
        pass


def import_image(cluster: Cluster, nodes: Sequence[str], registry: Registry) -> list[str]:
    """The image imported as a squashfs on each of ``nodes`` that does not hold it yet (one
    step over those nodes: ``enroot import`` unless the file is there); problems named by
    node. Later layouts of the run reuse it (their steps name the file)."""
    own = SlurmSettings.of(cluster)
    if not own.container_image or image_file(cluster) == own.container_image:
        return []
    done = registry.shared(("slurm-image", cluster.name), _Imported)
    with done.lock:
        todo = [n for n in nodes if (image_file(cluster), n) not in done.nodes]
    if not todo:
        return []
    # the import is idempotent (the file is looked for first): two callers at once only ask twice
    argv = [*_srun_base(cluster, CMD_STEP), "--nodes", str(len(todo)), "--ntasks-per-node",
            "1", "--ntasks", str(len(todo)), "--nodelist", ",".join(todo), "--label",
            "sh", "-c", _IMPORT, "ppsweep-import", image_file(cluster),
            "docker://" + own.container_image]
    res = commands(cluster).run(argv, 1800, f"cluster {cluster.name}: image import")
    ok = {todo[int(m.group(1))] for m in re.finditer(r"^\s*(\d+): ppsweep-image ",
                                                     res.stdout, re.M)
          if int(m.group(1)) < len(todo)}
    with done.lock:
        done.nodes |= {(image_file(cluster), n) for n in ok}
    said = (res.stdout + res.stderr).strip()[-400:]
    return [f"{n}: enroot import of {own.container_image} into {image_file(cluster)} "
            f"failed: {said}" for n in todo if n not in ok]


# -- the allocation's limits: its time, its nodes -----------------------------------------------


def time_left_s(where: Commands, jobid: str) -> float | None:
    """Seconds allocation ``jobid`` has left (``squeue -o %L``: ``[D-][H:]M:S``); None when it
    has no limit."""
    out = where.checked(["squeue", "--noheader", "--jobs", jobid, "--format", "%L"], 30,
                        f"allocation {jobid}").strip()
    days, _, clock = out.rpartition("-")
    parts = clock.split(":")
    if not out or not all(p.isdigit() for p in parts) or (days and not days.isdigit()):
        return None  # UNLIMITED, NOT_SET, or no longer listed (the state check says which)
    seconds = 0
    for p in parts:
        seconds = seconds * 60 + int(p)
    return seconds + int(days or 0) * 86400


def job_state(where: Commands, jobid: str) -> str:
    """The job's state (``RUNNING``, ``NODE_FAIL``, ``TIMEOUT``…); "" once the queue no longer
    lists it."""
    out = where.run(["squeue", "--noheader", "--jobs", jobid, "--states", "all", "--format",
                     "%T"], 30, f"allocation {jobid}").stdout.split()
    return out[0] if out else ""


_FAILED_STATES = ("down", "drain", "fail", "maint", "no_respond", "not_responding", "unk",
                  "power_down", "reboot")


def failed_nodes(where: Commands, names: Sequence[str]) -> list[str]:
    """The nodes of ``names`` that Slurm does not count as usable (down, drained, failing,
    not responding), with the reason Slurm gives."""
    out = where.run(["sinfo", "--noheader", "--Node", "--nodes", ",".join(names), "--format",
                     "%N|%T|%E"], 30, "sinfo").stdout
    found = []
    for line in out.splitlines():
        name, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        if name in names and any(s in state.lower() for s in _FAILED_STATES):
            found.append(f"{name} ({state.lower()}{': ' + reason if reason.strip() else ''})")
    return sorted(set(found))


def before_layout(cluster: Cluster, eta_s: float | None, run_id: str, registry: Registry,
                  say: Callable[[str], None]) -> Cluster:
    """Before a layout starts: the allocation still runs, on nodes that all work, with at least
    the layout's ETA + ``time_margin_s`` left. Otherwise (``on_limit``): "renew" releases it
    and makes a new one (without the failed nodes); "stop" raises ClusterStop. A new
    allocation is never renewed for lack of time (another would have no more): the layout
    starts, said to be short; an allocation the user holds (jobid) is never released."""
    own = SlurmSettings.of(cluster)
    where = commands(cluster)
    held = registry.shared(("slurm-allocation", cluster.name), lambda: Allocation(
        cluster.name, own.jobid, owned=False, where=where))
    what = f"cluster {cluster.name}: allocation {own.jobid}"
    state = job_state(where, own.jobid)
    down = failed_nodes(where, [h.name for h in cluster.hosts])
    reason = ""
    if state != "RUNNING" or down:
        reason = f"{what} {'ended (' + state + ')' if state else 'ended'}" if (
            state != "RUNNING") else f"{what} runs"
        if down:
            reason += f"; its node(s) {', '.join(down)} failed"
    else:
        left = time_left_s(where, own.jobid)
        need = (eta_s or 0.0) + own.time_margin_s
        if left is not None and left < need:
            eta = f"ETA {eta_s:.0f} s" if eta_s is not None else "ETA not known yet"
            reason = (f"{what} has {left:.0f} s left, fewer than the next layout needs "
                      f"({eta} + time_margin_s {own.time_margin_s} s)")
            if held.layouts == 0:
                say(f"WARNING: {reason}; it was made for this layout, a new one would have no "
                    "more time: the layout starts (its rounds may be cut: a resume reruns them)")
                reason = ""
            elif not held.owned:
                raise ClusterStop(f"{reason}; it is the user's (jobid), not released: stopping")
    if not reason:
        held.layouts += 1
        return cluster
    if own.on_limit == "stop":
        raise ClusterStop(f"{reason}; on_limit = \"stop\": stopping")
    exclude = [d.split(" ", 1)[0] for d in down]
    say(f"{reason}; on_limit = \"renew\": releasing it, asking for a new one of "
        f"{len(cluster.hosts)} node(s)" + (f" without {', '.join(exclude)}" if exclude else ""))
    if held.owned:
        held.close()
    name = job_name(run_id, cluster.name)
    try:
        jobid = _allocate(where, salloc_argv(cluster, name, f"ppsweep run {run_id}", exclude),
                          name, 600.0, f"cluster {cluster.name}")
    except SlurmError as exc:
        raise ClusterStop(f"{reason}; no new allocation: {exc}") from None
    held.renewed(jobid)
    os.environ[JOBID_ENV + cluster.name] = jobid
    fresh = _with_nodes(cluster, jobid)
    say(f"cluster {cluster.name}: new allocation {jobid} on "
        f"{', '.join(h.name for h in fresh.hosts)}")
    return fresh
