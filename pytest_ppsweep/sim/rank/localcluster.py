"""Start an emulated multi-node service on loopback addresses (tests, benchmarks, demos).

Each rank is a real ``python3 -m pytest_ppsweep.sim`` process bound to its own address, exactly
as the plugin launches them; logs go to ``<log_dir>/node<r>.log``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LocalCluster:
    """Rank processes of one service (mutable: holds the processes)."""

    hosts: list[str]
    port: int
    dist_port: int
    extra_args: list[str]
    env: dict[str, str]
    log_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def command(self, rank: int) -> list[str]:
        """The launch command of ``rank``."""
        return [
            sys.executable, "-m", "pytest_ppsweep.sim",
            "--nnodes", str(len(self.hosts)), "--node-rank", str(rank),
            "--dist-init-addr", f"{self.hosts[0]}:{self.dist_port}",
            "--host", self.hosts[rank], "--port", str(self.port), *self.extra_args,
        ]  # fmt: skip

    def start(self, ranks: list[int] | None = None) -> None:
        """Spawn the rank processes (all by default)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        for rank in ranks if ranks is not None else range(len(self.hosts)):
            with (self.log_dir / f"node{rank}.log").open("wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        self.command(rank), stdout=log, stderr=subprocess.STDOUT, env=env
                    )
                )

    @property
    def base_url(self) -> str:
        """Rank 0's URL."""
        return f"http://{self.hosts[0]}:{self.port}"

    def log(self, rank: int) -> str:
        """Current log text of ``rank``."""
        return (self.log_dir / f"node{rank}.log").read_text(errors="replace")

    def wait_healthy(self, timeout_s: float = 30.0) -> None:
        """Poll rank 0's ``/health`` until 200 (raises on timeout or a dead rank)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i, proc in enumerate(self.procs):
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"rank {i} exited with {proc.returncode}:\n{self.log(i)[-3000:]}"
                    )
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(self.base_url + "/health", timeout=1) as resp,
            ):
                if resp.status == 200:
                    return
            time.sleep(0.02)
        raise TimeoutError(f"service not healthy after {timeout_s}s:\n{self.log(0)[-3000:]}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM every rank we started, SIGKILL stragglers."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
