"""Launch one configuration: one rank process per node, and stop all of them.

A :class:`Service` is a context manager usable without pytest (testcontainers' habit): entering
starts every rank and waits until the service is ready; leaving always stops every rank, also
when the boot failed half-way. Every live rank is also tracked in the run's
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
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_ppsweep.cluster.backends import backend_of, launcher_for
from pytest_ppsweep.cluster.base import Launcher, RankHandle
from pytest_ppsweep.cluster.labels import rank_labels
from pytest_ppsweep.cluster.rankspec import RankSpec, rank_specs
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.cluster.strays import stray_message
from pytest_ppsweep.folder.runfolder import LAUNCH_SH, node_log_name
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.redact import REDACTED, scrub_all, secret_values
from pytest_ppsweep.service.liveness import LayoutDead, Liveness
from pytest_ppsweep.service.logscan import Finding, LogScanner, root_cause, tail
from pytest_ppsweep.service.probe import BOOT_TOKEN_ENV
from pytest_ppsweep.service.readiness import BootFailed, BootStatus, wait_until_ready

__all__ = ["BootFailed", "LayoutDead", "Service"]

class Service:
    """A booted configuration: every rank running, rank 0 serving."""

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
    ) -> None:
        """``on_status``: called at every poll of the boot wait (readiness.BootStatus);
        ``specs``: the ranks' commands when the caller built them already (the boot writes them
        into the manifest first: built once per boot)."""
        self.sweep = sweep
        self.cluster = cluster
        self.config = config
        self.log_dir = log_dir
        self.specs = specs if specs is not None else rank_specs(sweep, cluster, config)
        # The text of every secret the ranks are given: a rank may print one (an argparse
        # error echoes its arguments), so log lines shown in failures and the log files are
        # scrubbed of them.
        self.secrets = secret_values(
            {"server": sweep.server_args(config), "env": [s.env for s in self.specs]}
        )
        self.progress = progress
        self.on_status = on_status
        self.scanner = scanner or LogScanner(sweep.fatal_patterns)
        self.run_id = run_id
        # A registry of its own (no caller's) is closed with the service: used without pytest,
        # a service leaves neither ranks nor connections behind.
        self._own_registry = registry is None
        self.registry = registry if registry is not None else Registry()
        self.launcher = launcher or launcher_for(cluster, sweep, self.registry)
        self.procs: list[RankHandle] = []
        self.boot_s: float | None = None
        self.boot_error: str | None = None
        self.boot_token = ""  # set by start(): unique per boot, PPSWEEP_BOOT_TOKEN of its ranks
        self._owned: set[int] = set()  # node ranks proven to hold their own listening socket
        # Set from health until teardown (:meth:`watch`): the first rank that died.
        self.liveness: Liveness | None = None
        self.died = threading.Event()  # the liveness watch's event; never set before it starts
        # node rank (stop: position in procs, node order) → (began, ended), time.monotonic(), of
        # its launcher's start and its handle's stop: the nodes start and stop at once
        self.start_spans: dict[int, tuple[float, float]] = {}
        self.stop_spans: dict[int, tuple[float, float]] = {}
        # "1 process had left rank 2's process group: pid …": processes of a rank found by its
        # labels after its group was stopped (cluster/strays.py), stopped too, reported here
        self.strays: list[str] = []

    @property
    def base_url(self) -> str:
        return self.url(0)

    def url(self, node_rank: int) -> str:
        return f"http://{self.address(node_rank)}:{self.cluster.port}"

    def address(self, node_rank: int) -> str:
        return self.specs[node_rank].address

    def log_path(self, node_rank: int) -> Path:
        return self.log_dir / node_log_name(node_rank)

    @property
    def log_paths(self) -> list[Path]:
        return [self.log_path(s.node_rank) for s in self.specs]

    def write_commands(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"# node{s.node_rank} ({s.host})\n{s.command_line()}\n" for s in self.specs]
        (self.log_dir / LAUNCH_SH).write_text("".join(lines), encoding="utf-8")

    def start(self) -> None:
        """Start every rank: rank 0 first (it hosts the rendezvous), then the others at once
        (a container start over SSH takes ~0.5-1 s per node)."""
        self._keep_previous_logs()
        self.write_commands()
        slots: list[RankHandle | None] = [None] * len(self.specs)
        token = self.boot_token = uuid.uuid4().hex
        self._owned.clear()

        def one(i: int) -> None:
            # this boot's token in every rank's environment (the emulator echoes it)
            spec = replace(self.specs[i], env={**self.specs[i].env, BOOT_TOKEN_ENV: token})
            labels = rank_labels(self.run_id, self.cluster.name, self.config.id, spec.node_rank)
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
        """Block until rank 0 and every other rank answer /health 200; returns boot seconds."""
        self.boot_s = wait_until_ready(self, timeout_s, on_status=self.on_status)
        return self.boot_s

    def watch(self, **options: Any) -> Liveness:
        """Watch every rank until :meth:`stop` (service.liveness); ``options`` go to Liveness
        (poll interval, clocks: the tests')."""
        if self.liveness is None:
            self.liveness = Liveness(self, **options)
            self.died = self.liveness.died
            self.liveness.start()
        return self.liveness

    @property
    def dead(self) -> str | None:
        """Why the layout is dead (the first rank that died after health), or None."""
        return None if self.liveness is None else self.liveness.reason

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
        """Every node log of this service rewritten without the secrets' text (after stop:
        nothing writes them any more)."""
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

    def stop(self) -> None:
        """Stop every rank of this service (idempotent); the watch first, so that stopping
        the ranks does not read as their death."""
        if self.liveness is not None:
            self.liveness.stop()
        try:
            self._stop_ranks()
        finally:
            if self._own_registry:
                self.registry.close()
        self.scrub_logs()

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


