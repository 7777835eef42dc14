"""Launch one configuration: its deployment's server groups, one rank process per node, then its
router, and stop all of them.

A :class:`Service` is a context manager usable without pytest (testcontainers' habit): entering
starts every server group in the deployment's order (:class:`GroupService`: one rank per node of
the group), then the router when there is one, and waits until each group, then the router, is
ready; leaving always stops every part in the reverse order, also when the boot failed half-way
or a signal's KeyboardInterrupt ended it. Every live rank is also tracked in the run's
:class:`~pytest_ppsweep.cluster.registry.Registry` (given by the caller, else one of the
service's own, closed when the service stops), so that whoever owns the registry (the plugin's
session) stops what is left at a Ctrl-C, a SIGTERM or an interpreter exit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from pytest_ppsweep.cluster.backends import backend_of, launcher_for
from pytest_ppsweep.cluster.base import Launcher, RankHandle
from pytest_ppsweep.cluster.labels import rank_label, rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec, rank_specs, router_spec
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.strays import stray_message
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import LAUNCH_SH, node_log_name
from pytest_ppsweep.matrix.deployment import ServerGroup
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.redact import REDACTED, scrub_all, secret_values
from pytest_ppsweep.service.liveness import LayoutDead, Liveness
from pytest_ppsweep.service.logscan import Finding, LogScanner, node_of_log, root_cause, tail
from pytest_ppsweep.service.probe import BOOT_TOKEN_ENV
from pytest_ppsweep.service.readiness import BootFailed, BootStatus, wait_until_ready
from pytest_ppsweep.service.router import RouterPart

__all__ = ["BootFailed", "GroupService", "LayoutDead", "LogScan", "LoggedPart", "Part", "Service"]

class Part(Protocol):
    """What :class:`Service` asks of each part of a deployment it starts: a server group
    (:class:`GroupService`) or the router (an engine's router launcher)."""

    name: str

    def start(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> float: ...

    def stop(self) -> None: ...


@runtime_checkable
class LoggedPart(Part, Protocol):
    """A part whose logs are scanned as a group's are (a router that keeps a log)."""

    def findings(self) -> list[Finding]: ...


@dataclass(frozen=True)
class LogScan:
    """One part's fatal lines: a server group's (its label and role; "" for a single serve
    group) or the router's (label and role ``router``)."""

    label: str
    role: str
    findings: list[Finding]


class _Logs:
    """The fatal lines and tails of a set of rank logs, secrets scrubbed (a group's, a
    deployment's)."""

    scanner: LogScanner
    secrets: list[str]

    @property
    def log_paths(self) -> list[Path]:
        raise NotImplementedError

    def findings(self) -> list[Finding]:
        """Fatal lines in every node's log so far."""
        out: list[Finding] = []
        for path in self.log_paths:
            if path.exists():
                out += self.scanner.scan_file(path)
        if self.secrets:
            out = [replace(f, line=scrub_all(f.line, self.secrets, REDACTED)) for f in out]
        return out

    def evidence(self, lines: int = 25) -> str:
        """Fatal log lines so far (root cause first) and every node's log tail, for a failure."""
        findings = self.findings()
        root = root_cause(findings)
        shown = ([str(root)] if root else []) + [str(f) for f in findings if f is not root][:20]
        head = "matching log lines:\n" + "\n".join(shown) if shown else "no fatal log line"
        return f"{head}\n{self.log_tail(lines)}"

    def log_tail(self, lines: int = 25) -> str:
        parts = []
        for path in self.log_paths:
            parts.append(f"--- {path.name} (last {lines} lines) ---\n{tail(path, lines)}")
        return scrub_all("\n".join(parts), self.secrets, REDACTED)

    def scrub_logs(self) -> None:
        """Every node log rewritten without the secrets' text (after stop: nothing writes them
        any more)."""
        if not self.secrets:
            return
        for path in self.log_paths:
            try:
                text = path.read_text(encoding="utf-8", errors="surrogateescape")
            except FileNotFoundError:
                continue
            clean = scrub_all(text, self.secrets, REDACTED)
            if clean != text:
                path.write_text(clean, encoding="utf-8", errors="surrogateescape")


class GroupService(_Logs):
    """One server group of a deployment: a rank per node of the group, rank 0 serving. Its
    node ranks count from 0 within the group; its logs are ``node<r>.log``, or
    ``<label>-node<r>.log`` for a labelled group of a layout of several."""

    def __init__(self, owner: Service, group: ServerGroup, specs: list[RankSpec]) -> None:
        self.group = group
        self.name = group.name
        self.sweep, self.cluster, self.config = owner.sweep, owner.cluster, owner.config
        self.log_dir, self.scanner, self.secrets = owner.log_dir, owner.scanner, owner.secrets
        self.run_id, self.registry, self.launcher = owner.run_id, owner.registry, owner.launcher
        self.on_status = owner.on_status
        self.progress: Callable[[str], None] = lambda msg: owner.progress(msg)
        self.specs = specs
        self.procs: list[RankHandle] = []
        self.boot_s: float | None = None
        self.boot_token = ""  # set by start(): unique per boot, PPSWEEP_BOOT_TOKEN of its ranks
        self._owned: set[int] = set()  # node ranks proven to hold their own listening socket
        # Set from health until teardown (:meth:`watch`): the first rank that died.
        self.liveness: Liveness | None = None
        # node rank (stop: position in procs, node order) → (began, ended), time.monotonic(), of
        # its launcher's start and its handle's stop: the nodes start and stop at once
        self.start_spans: dict[int, tuple[float, float]] = {}
        self.stop_spans: dict[int, tuple[float, float]] = {}
        # "1 process had left rank 2's process group: pid …": processes of a rank found by its
        # labels after its group was stopped (cluster/strays.py), stopped too, reported here
        self.strays: list[str] = []

    def url(self, node_rank: int) -> str:
        return f"http://{self.address(node_rank)}:{self.cluster.port}"

    def address(self, node_rank: int) -> str:
        return self.specs[node_rank].address

    def log_path(self, node_rank: int) -> Path:
        return self.log_dir / node_log_name(node_rank, self.group.label)

    @property
    def log_paths(self) -> list[Path]:
        return [self.log_path(s.node_rank) for s in self.specs]

    def findings(self) -> list[Finding]:
        """Fatal lines in every node's log of the group so far; in a layout of several groups
        each names its group and node (``decode group pp1-tp16-ep16 node1 (host)``), so that a
        failure says which group's log holds it."""
        found = super().findings()
        if not self.group.label:
            return found
        return [replace(f, where=self._where(f)) for f in found]

    def _where(self, finding: Finding) -> str:
        node = node_of_log(self.log_paths, finding)
        if node is None:
            return self.group.name
        return f"{self.group.name} node{node} ({self.specs[node].host})"

    def log_scans(self) -> list[LogScan]:
        """The group's fatal lines so far, as one part of its deployment's log scan."""
        return [LogScan(self.group.label, self.group.role, self.findings())]

    def start(self) -> None:
        """Start every rank: rank 0 first (it hosts the rendezvous), then the others at once
        (a container start over SSH takes ~0.5-1 s per node)."""
        slots: list[RankHandle | None] = [None] * len(self.specs)
        token = self.boot_token = uuid.uuid4().hex
        self._owned.clear()

        def one(i: int) -> None:
            # this boot's token in every rank's environment (the emulator echoes it)
            spec = replace(self.specs[i], env={**self.specs[i].env, BOOT_TOKEN_ENV: token})
            labels = rank_labels(self.run_id, self.cluster.name, self.config.id,
                                 rank_label(spec.node_rank, spec.group))
            began = time.monotonic()
            proc = self.launcher.start(spec, self.log_path(spec.node_rank), labels)
            self.start_spans[spec.node_rank] = (began, time.monotonic())
            self.registry.track(proc)
            slots[i] = proc

        try:
            one(0)
            if len(self.specs) > 1:
                # Leaving the pool waits for every start, so `finally` sees every rank started.
                with ThreadPoolExecutor(max_workers=len(self.specs) - 1) as pool:
                    for future in [pool.submit(one, i) for i in range(1, len(self.specs))]:
                        future.result()  # the first failure, in node order
        finally:
            self.procs.extend(p for p in slots if p is not None)

    def wait_ready(self, timeout_s: float) -> float:
        """Block until the group's rank 0 and every other rank answer /health 200; returns
        boot seconds."""
        self.boot_s = wait_until_ready(self, timeout_s, on_status=self.on_status)
        return self.boot_s

    def watch(self, died: threading.Event, **options: Any) -> Liveness:
        """Watch every rank of the group until :meth:`stop` (service.liveness), setting
        ``died`` at the first death."""
        if self.liveness is None:
            self.liveness = Liveness(self, died=died, **options)
            self.liveness.start()
        return self.liveness

    def exited(self) -> list[tuple[int, int]]:
        """(node rank, exit code) of every rank process that has ended."""
        return [(i, rc) for i, p in enumerate(self.procs) if (rc := p.poll()) is not None]

    def impostor(self, node_rank: int, token: str | None = None) -> str | None:
        """Who answers on ``node_rank``'s port when it is not the rank this service launched
        (a server left from an earlier run), else None. Proven by the boot token the answer
        echoed (``token``: the emulator's, another boot's differs), else where the launcher can
        tell (local ranks: the process holding the listening socket); unknown counts as ours."""
        address = self.specs[node_rank].address
        where = f"{address}:{self.cluster.port}"
        if token is not None:
            if token == self.boot_token:
                return None  # the emulator this boot started
            why = f"{where} answers with boot token {token!r}, not this boot's {self.boot_token!r}"
        elif node_rank in self._owned:
            return None  # proven before: a listening socket does not change hands
        else:
            proc = self.procs[node_rank] if node_rank < len(self.procs) else None
            owns = getattr(proc, "owns_port", None)
            held = owns(address, self.cluster.port) if owns is not None else None
            if held:
                self._owned.add(node_rank)
            if held is not False:
                return None
            why = f"{where} is held by another process"
        holder = backend_of(self.cluster).port_holder(address, self.cluster.port)
        if holder:
            why += f": {holder}"
        return why

    def stop(self) -> None:
        """Stop every rank of the group (idempotent); the watch first, so that stopping the
        ranks does not read as their death."""
        if self.liveness is not None:
            self.liveness.stop()
        self._stop_ranks()

    def _stop_ranks(self) -> None:
        """Every rank stopped at once (a container's stop and removal over SSH takes ~0.5-1 s);
        a rank that fails to stop stays tracked (the registry's close tries again) and the first
        failure, in node order, is raised once every rank was tried."""
        procs = list(self.procs)

        def one(i: int) -> None:
            began = time.monotonic()
            try:
                procs[i].stop()
            finally:
                self.stop_spans[i] = (began, time.monotonic())
            self.registry.untrack(procs[i])
            pids: list[int] = getattr(procs[i], "strays", [])
            message = stray_message(i, pids) if pids else ""
            if message and message not in self.strays:  # stop() is idempotent: report once
                self.strays.append(message)
                self.progress(f"{self.config.id}: {message}")

        if len(procs) <= 1:
            for i in range(len(procs)):
                one(i)
            return
        with ThreadPoolExecutor(max_workers=len(procs)) as pool:
            futures = [pool.submit(one, i) for i in range(len(procs))]
        for future in futures:
            future.result()  # the first failure, in node order


class Service(_Logs):
    """A booted configuration: every server group's ranks running, then its router; the URL
    the benchmark aims at is :attr:`target_url` (the deployment's).

    Its ranks are numbered across the groups, in group order (:attr:`specs`, :meth:`url`,
    :meth:`exited`, :attr:`procs`): for a layout of one serve group, its node ranks."""

    def __init__(
        self,
        sweep: Sweep,
        cluster: Cluster,
        config: Config,
        log_dir: Path,
        progress: Callable[[str], None] = lambda _msg: None,
        scanner: LogScanner | None = None,
        run_id: str = "",
        launcher: Launcher | None = None,
        registry: Registry | None = None,
        on_status: Callable[[BootStatus], None] | None = None,
        specs: list[RankSpec] | None = None,
        router: Part | None = None,
    ) -> None:
        """``on_status``: called at every poll of the boot wait (readiness.BootStatus);
        ``specs``: the ranks' commands when the caller built them already (the boot writes them
        into the manifest first: built once per boot); ``router``: the deployment's router
        when it has one (an engine's router launcher)."""
        self.sweep = sweep
        self.cluster = cluster
        self.config = config
        self.log_dir = log_dir
        deployment = config.deployment
        if deployment.router is None and router is not None:
            raise ValueError(f"{config.id}: the deployment has no router, the service was "
                             "given one")
        specs = specs if specs is not None else rank_specs(sweep, cluster, config)
        # The text of every secret the ranks are given: a rank may print one (an argparse
        # error echoes its arguments), so log lines shown in failures and the log files are
        # scrubbed of them.
        self.secrets = secret_values(
            {"server": sweep.server_args(config), "env": [s.env for s in specs]}
        )
        self.progress = progress
        self.on_status = on_status
        self.scanner = scanner or LogScanner(sweep.fatal_patterns, engine_of(config.engine))
        self.run_id = run_id
        # A registry of its own (no caller's) is closed with the service: used without pytest,
        # a service leaves neither ranks nor connections behind.
        self._own_registry = registry is None
        self.registry = registry if registry is not None else Registry()
        self.launcher = launcher or launcher_for(cluster, sweep, self.registry)
        self.groups = [GroupService(self, g, [s for s in specs if s.group == g.label])
                       for g in deployment.groups]
        self.router = router if router is not None or deployment.router is None else (
            self._router(sweep, cluster, config))
        self.target_url = deployment.url([h.address for h in cluster.hosts], cluster.port,
                                         cluster.placement(config))
        self.boot_s: float | None = None
        self.boot_error: str | None = None
        self.died = threading.Event()  # set at the first death any group's watch sees
        # the parts whose start began, in order (stopped in reverse; a start that failed
        # half-way counts: its started ranks are stopped)
        self._started: list[Part] = []

    def _router(self, sweep: Sweep, cluster: Cluster, config: Config) -> Part:
        """The deployment's router, started by the cluster's launcher on its node
        (service/router.py), aimed at every prefill and decode server."""
        spec = router_spec(sweep, cluster, config)
        router = config.deployment.router
        assert spec is not None and router is not None  # a deployment with a router
        workers = sum(1 for g in config.deployment.groups if g.role in ("prefill", "decode"))
        return RouterPart.of(spec, router.port, workers, engine_of(router.engine),
                             launcher=self.launcher, registry=self.registry,
                             log_dir=self.log_dir,
                             scanner=LogScanner(sweep.fatal_patterns,
                                                patterns=engine_of(router.engine)
                                                .router_fatal_patterns),
                             run_id=self.run_id,
                             cluster=cluster.name, config_id=config.id, secrets=self.secrets,
                             progress=self.progress)

    # -- the ranks of every group, numbered in group order --------------------------------------

    def _at(self, rank: int) -> tuple[GroupService, int]:
        for group in self.groups:
            if rank < len(group.specs):
                return group, rank
            rank -= len(group.specs)
        raise IndexError(f"{self.config.id}: no rank {rank}")

    def _offsets(self) -> list[int]:
        out, n = [], 0
        for group in self.groups:
            out.append(n)
            n += len(group.specs)
        return out

    @property
    def specs(self) -> list[RankSpec]:
        return [s for g in self.groups for s in g.specs]

    @property
    def procs(self) -> list[RankHandle]:
        return [p for g in self.groups for p in g.procs]

    @property
    def boot_token(self) -> str:
        """The first group's boot token (a layout of one group: its only one)."""
        return self.groups[0].boot_token

    @property
    def start_spans(self) -> dict[int, tuple[float, float]]:
        return {off + r: span for off, g in zip(self._offsets(), self.groups, strict=True)
                for r, span in g.start_spans.items()}

    @property
    def stop_spans(self) -> dict[int, tuple[float, float]]:
        return {off + r: span for off, g in zip(self._offsets(), self.groups, strict=True)
                for r, span in g.stop_spans.items()}

    @property
    def strays(self) -> list[str]:
        return [m for g in self.groups for m in g.strays]

    def url(self, node_rank: int) -> str:
        group, rank = self._at(node_rank)
        return group.url(rank)

    def address(self, node_rank: int) -> str:
        group, rank = self._at(node_rank)
        return group.address(rank)

    def log_path(self, node_rank: int) -> Path:
        group, rank = self._at(node_rank)
        return group.log_path(rank)

    @property
    def log_paths(self) -> list[Path]:
        return [p for g in self.groups for p in g.log_paths]

    def log_scans(self) -> list[LogScan]:
        """The fatal lines so far per part: each group's, in order, then the router's when it
        keeps logs (what is recorded per group, run/lifecycle.py)."""
        out = [scan for g in self.groups for scan in g.log_scans()]
        if isinstance(self.router, LoggedPart):
            out.append(LogScan("router", "router", self.router.findings()))
        return out

    def findings(self) -> list[Finding]:
        """Fatal lines in every part's logs so far, group by group, then the router's."""
        return [f for scan in self.log_scans() for f in scan.findings]

    def exited(self) -> list[tuple[int, int]]:
        """(rank, exit code) of every rank process that has ended."""
        return [(off + r, rc) for off, g in zip(self._offsets(), self.groups, strict=True)
                for r, rc in g.exited()]

    def impostor(self, node_rank: int, token: str | None = None) -> str | None:
        group, rank = self._at(node_rank)
        return group.impostor(rank, token)

    # -- boot -----------------------------------------------------------------------------------

    def write_commands(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"# {s.group + '-' if s.group else ''}node{s.node_rank} ({s.host})\n"
                 f"{s.command_line()}\n" for s in self.specs]
        (self.log_dir / LAUNCH_SH).write_text("".join(lines), encoding="utf-8")

    def start(self) -> None:
        """Start every server group, in the deployment's order (the router starts once they
        are ready: :meth:`wait_ready`)."""
        self._keep_previous_logs()
        self.write_commands()
        for part in self.groups:
            self._start(part)

    def _start(self, part: Part) -> None:
        if part not in self._started:
            self._started.append(part)
        part.start()

    def _keep_previous_logs(self) -> None:
        # A resumed run boots a layout again: its earlier logs stay as evidence under another
        # name, and the fail-fast watch and the log scan read only this boot's lines.
        for path in self.log_paths:
            if path.exists():
                n = 1
                while path.with_name(f"{path.name}.{n}").exists():
                    n += 1
                path.rename(path.with_name(f"{path.name}.{n}"))

    def wait_ready(self, timeout_s: float) -> float:
        """Block until every group, in order, is ready, then start the router and block until
        it is (within ``timeout_s`` in all); returns boot seconds."""
        start = time.monotonic()
        for group in self.groups:
            group.wait_ready(max(timeout_s - (time.monotonic() - start), 0.0))
        if self.router is not None:
            # Started once every server answers: a router started beside booting servers
            # retries each health check for as long as they boot, logs every failed try, and
            # registers the servers seconds after they are up.
            self._start(self.router)
            self.router.wait_ready(max(timeout_s - (time.monotonic() - start), 0.0))
        took = self.groups[0].boot_s if len(self.groups) == 1 and self.router is None else None
        self.boot_s = took if took is not None else time.monotonic() - start
        return self.boot_s

    def watch(self, **options: Any) -> Liveness:
        """Watch every rank of every group until :meth:`stop` (service.liveness); ``options`` go
        to each group's Liveness (poll interval, clocks: the tests'); the first group's watch is
        returned."""
        watches = [g.watch(self.died, **options) for g in self.groups]
        return watches[0]

    @property
    def liveness(self) -> Liveness | None:
        """The first group's watch (a layout of one group: its only one); None before it."""
        return self.groups[0].liveness

    def check(self) -> None:
        """Every group's ranks looked at now (not only at their watch's last poll)."""
        for group in self.groups:
            if group.liveness is not None:
                group.liveness.check()

    @property
    def dead(self) -> str | None:
        """Why the layout is dead (the first rank that died after health), or None."""
        for group in self.groups:
            if group.liveness is not None and group.liveness.reason is not None:
                return group.liveness.reason
        return None

    # -- teardown -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every part of this service (idempotent): the router, then the groups in the
        reverse of their start order. Every part is tried; the first failure is raised after."""
        first: BaseException | None = None
        for part in reversed(self._started):
            try:
                part.stop()
            except BaseException as exc:  # every part stopped before the first failure is raised
                first = first or exc
        try:
            if self._own_registry:
                self.registry.close()
        finally:
            self.scrub_logs()
        if first is not None:
            raise first

    def __enter__(self) -> Service:
        start = time.monotonic()
        try:
            self.start()
            self.wait_ready(self.sweep.boot_timeout_s)
            self.watch(health_stall_s=self.sweep.health_stall_s)
        except BaseException as exc:
            self.boot_error = str(exc)
            self.boot_s = time.monotonic() - start
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
