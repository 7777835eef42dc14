"""A two-node boot whose logs are files of the test's: what service.readiness waits on, without
processes (``exited`` and the logs are the test's to script)."""

from __future__ import annotations

from pathlib import Path

from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.service.logscan import Finding, LogScanner, tail


class TwoNodeBoot:
    """PP2 on two nodes whose logs start as ``node0``/``node1``; nobody becomes healthy (the
    URL is refused) and no rank exits unless a subclass says so."""

    def __init__(self, folder: Path, node0: str, node1: str) -> None:
        folder.mkdir()
        self.config = Config(pp=2, tp=1, ep=1)
        self.scanner = LogScanner()
        self._logs = [folder / "node0.log", folder / "node1.log"]
        self._logs[0].write_text(node0)
        self._logs[1].write_text(node1)

    @property
    def specs(self) -> list[object]:
        return [object(), object()]

    @property
    def log_paths(self) -> list[Path]:
        return self._logs

    def url(self, node_rank: int) -> str:
        return "http://127.0.0.1:9"  # refused: nobody is healthy

    def exited(self) -> list[tuple[int, int]]:
        return []

    def impostor(self, node_rank: int, token: str | None) -> str | None:
        return None

    def findings(self) -> list[Finding]:
        return [f for p in self._logs for f in self.scanner.scan_file(p)]

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(f"--- {p.name} (last {lines} lines) ---\n{tail(p, lines)}"
                         for p in self._logs)

    def progress(self, message: str) -> None:
        pass
