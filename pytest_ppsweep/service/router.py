"""The router of a disaggregated layout as one part of its :class:`~pytest_ppsweep.service.
launch.Service`: one process on its node, started by the cluster's own launcher (so it runs
where the ranks run: a local process, a container over SSH, a Slurm step), ready when the
engine's readiness endpoint says every server behind it is healthy, and stopped first at
teardown. Its log is scanned for fatal lines as a server group's are (``router.log`` beside the
ranks' logs), and a boot failure names it and shows its log's tail.

The router is the benchmark's target: with it down, no request reaches the servers, so its
readiness is part of the layout's boot."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pytest_ppsweep.cluster.base import Launcher, RankHandle
from pytest_ppsweep.cluster.labels import CONFIG_LABEL, rank_labels
from pytest_ppsweep.cluster.rankspec import ROUTER_LABEL, RankSpec
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.redact import REDACTED, scrub_all
from pytest_ppsweep.service.logscan import Finding, LogScanner, tail
from pytest_ppsweep.service.readiness import BootFailed

__all__ = ["ROUTER_LOG", "RouterPart"]

ROUTER_LOG = "router.log"  # in the layout's service/<config>/ folder
_POLL_S = 0.1  # between two readiness reads
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # a terminal colour code (the router colours its log)
_READ_TIMEOUT_S = 2.0  # one readiness read


class RouterPart:
    """One router process of one layout (:class:`~pytest_ppsweep.service.launch.Part`,
    :class:`~pytest_ppsweep.service.launch.LoggedPart`)."""

    name = "router"

    def __init__(self, spec: RankSpec, port: int, workers: int, engine: Engine, *,
                 launcher: Launcher, registry: Registry, log_dir: Path, scanner: LogScanner,
                 labels: dict[str, str], secrets: list[str] | None = None,
                 progress: Callable[[str], None] = lambda _msg: None) -> None:
        """``spec``: its command on its node (cluster/rankspec.router_spec); ``port``: where it
        listens; ``workers``: how many servers are behind it (every prefill and decode
        server)."""
        self.spec, self.port, self.workers, self.engine = spec, port, workers, engine
        self.launcher, self.registry, self.scanner = launcher, registry, scanner
        self.log_path = log_dir / ROUTER_LOG
        self.labels = labels
        self.secrets = secrets or []
        self.progress = progress
        self.proc: RankHandle | None = None
        self.boot_s: float | None = None

    @classmethod
    def of(cls, spec: RankSpec, port: int, workers: int, engine: Engine, *, launcher: Launcher,
           registry: Registry, log_dir: Path, scanner: LogScanner, run_id: str, cluster: str,
           config_id: str, secrets: list[str] | None = None,
           progress: Callable[[str], None] = lambda _msg: None) -> RouterPart:
        """A router labelled as the layout's ranks are (run, cluster, layout; node rank
        ``router``), so that the reaper finds it with them."""
        return cls(spec, port, workers, engine, launcher=launcher, registry=registry,
                   log_dir=log_dir, scanner=scanner,
                   labels=rank_labels(run_id, cluster, config_id, ROUTER_LABEL),
                   secrets=secrets, progress=progress)

    @property
    def url(self) -> str:
        return f"http://{self.spec.address}:{self.port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = self.launcher.start(replace(self.spec), self.log_path, self.labels)
        self.registry.track(self.proc)

    def wait_ready(self, timeout_s: float) -> float:
        """Block until the router's readiness endpoint counts every server healthy (bounded by
        ``timeout_s``); BootFailed naming the router, with its log's fatal lines and tail, when
        its process ends or the time runs out. Returns the seconds it took."""
        began = time.monotonic()
        deadline = began + timeout_s
        why = "not started"
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.poll()
                raise self._failed(f"the router process exited (code {code}) before it was "
                                   "ready")
            if self.findings():
                raise self._failed("a fatal line in the router's log")
            status, body = self._read()
            unready = self.engine.router_unready(status, body, self.workers) if status else (
                body.decode(errors="replace"))
            if unready is None:
                self.boot_s = time.monotonic() - began
                return self.boot_s
            why = unready
            if time.monotonic() >= deadline:
                raise self._failed(f"not ready after {timeout_s:g} s: {why}")
            time.sleep(_POLL_S)  # a bounded poll: the loop ends at the deadline

    def _read(self) -> tuple[int, bytes]:
        """(status, body) of one readiness read; (0, why) when nothing answered."""
        try:
            with urllib.request.urlopen(self.url + self.engine.router_ready_path,
                                        timeout=_READ_TIMEOUT_S) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError as exc:
            return 0, f"no answer on {self.url}: {exc}".encode()

    def _failed(self, reason: str) -> BootFailed:
        """The boot failure of the layout, named on its router and node."""
        findings = self.findings()
        cause = f": {findings[0].line.strip()[:200]}" if findings else ""
        head = (f"{self.labels.get(CONFIG_LABEL, '?')}: boot failed: router on "
                f"{self.spec.host} ({self.url}): {reason}{cause}")
        shown = "\n".join(str(f) for f in findings[:10]) or "no fatal log line"
        text = scrub_all(f"{head}\nmatching log lines:\n{shown}\n--- {ROUTER_LOG} (last 25 "
                         f"lines) ---\n{tail(self.log_path, 25)}", self.secrets, REDACTED)
        return BootFailed(text, reason=scrub_all(head, self.secrets, REDACTED),
                          cause=findings[0].kind if findings else "")

    def findings(self) -> list[Finding]:
        """Fatal lines in the router's log so far, each naming the router and its node."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        found = self.scanner.scan(_ANSI.sub("", text).splitlines(), str(self.log_path))
        where = f"router ({self.spec.host})"
        return [replace(f, where=where,
                        line=scrub_all(f.line, self.secrets, REDACTED)) for f in found]

    def stop(self) -> None:
        """Stop the router (idempotent); it stays tracked if its stop fails (the registry's
        close tries again)."""
        if self.proc is None:
            return
        self.proc.stop()
        self.registry.untrack(self.proc)
