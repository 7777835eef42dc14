"""The sweep as frozen objects: hosts, clusters, layouts (configs), the workload and the sweep.

Built only by :mod:`pytest_ppsweep.matrix.parse`, which validates the file first; everything
downstream reads these and never the TOML."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ppsweep.matrix.commspec import CommSpec
from pytest_ppsweep.matrix.schema import (
    MatrixError,
)

__all__ = ["Cluster", "Config", "Host", "MatrixError", "NoClusterFits", "Sweep", "Workload",
           "cluster_for"]


@dataclass(frozen=True)
class Host:
    """One node of a cluster: the address its rank binds and is reached at."""

    address: str
    name: str


@dataclass(frozen=True)
class Cluster:
    """Where configurations run: the nodes, how to reach them and how a rank is started."""

    name: str
    kind: str  # "local" (subprocess on this machine) or "ssh"
    launcher: str  # "process" or "docker"
    hosts: tuple[Host, ...]
    gpus_per_node: int
    server_module: str
    port: int
    dist_init_port: int
    nvidia_smi: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    python: str = ""  # empty: this interpreter (local clusters)
    ssh_user: str = "root"
    ssh_key: str = ""
    known_hosts: str = ""
    verify_host_keys: bool = True
    sudo_password_file: str = ""
    shm_size: str = "32g"  # docker launcher: /dev/shm of each container
    mounts: tuple[str, ...] = ()  # docker launcher: extra bind mounts "host:container[:ro]"

    @property
    def gpus(self) -> int:
        return len(self.hosts) * self.gpus_per_node

    def fits(self, config: Config) -> bool:
        """Whether ``config`` runs on this cluster: PP × TP is exactly its GPUs (the one place
        this rule is written)."""
        return config.gpus == self.gpus

    def rank0(self) -> Host:
        return self.hosts[0]


@dataclass(frozen=True)
class Config:
    """One PP/TP/EP layout: a test case."""

    pp: int
    tp: int
    ep: int
    server: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    order: int = 0

    @property
    def id(self) -> str:
        return f"pp{self.pp}-tp{self.tp}-ep{self.ep}"

    @property
    def gpus(self) -> int:
        """GPUs the layout needs: PP × TP (what :meth:`Cluster.fits` compares)."""
        return self.pp * self.tp

    @property
    def label(self) -> str:
        return f"{self.pp} / {self.tp} / {self.ep}"

    def matches(self, selector: str) -> bool:
        """Exact selection: the full id, ``ppN`` or ``ppN-tpM`` (never a substring)."""
        parts = self.id.split("-")
        return selector in (self.id, parts[0], "-".join(parts[:2]))


@dataclass(frozen=True)
class Workload:
    """The prefill benchmark every configuration runs."""

    dataset: str
    input_len: int
    output_len: int
    range_ratio: float
    concurrency: tuple[int, ...]
    num_requests: int
    repeats: int
    seed: int
    vocab_size: int
    warmup_requests: int
    api: str
    request_timeout_s: float
    round_timeout_s: float


@dataclass(frozen=True)
class Sweep:
    """A whole sweep file, validated."""

    path: Path
    name: str
    image: str
    model_path: str
    baseline: str  # a config id
    default_cluster: str
    devices: tuple[str, ...]
    server: Mapping[str, Any]
    env: Mapping[str, str]
    configs: tuple[Config, ...]
    workload: Workload
    clusters: Mapping[str, Cluster]
    boot_timeout_s: float
    spread_threshold: float
    min_repeats: int
    fatal_patterns: tuple[str, ...]
    thresholds: tuple[str, ...] = ()
    # "fail": a spread above spread_threshold makes the point INVALID (fails test_valid);
    # "warn": it is a warning only (exploratory runs).
    spread_rule: str = "fail"
    # The [comm] table (matrix.commspec): the all-reduce microbenchmark; None: not asked.
    comm: CommSpec | None = None

    def cluster(self, name: str | None) -> Cluster:
        chosen = name or self.default_cluster
        if chosen not in self.clusters:
            raise MatrixError(
                f"{self.path}: unknown cluster {chosen!r}; expected one of "
                f"{', '.join(sorted(self.clusters))}"
            )
        return self.clusters[chosen]

    def pool(self, names: str | None) -> tuple[Cluster, ...]:
        """The clusters of a comma-separated list (default: ``[sweep] cluster``)."""
        chosen = [n.strip() for n in (names or self.default_cluster).split(",") if n.strip()]
        if len(set(chosen)) != len(chosen):
            raise MatrixError(f"{self.path}: cluster pool {chosen} names a cluster twice")
        return tuple(self.cluster(n) for n in chosen)

    def config(self, config_id: str) -> Config:
        return next(c for c in self.configs if c.id == config_id)


class NoClusterFits(ValueError):
    """No cluster of the pool fits a layout; the message names the layout and the clusters."""


def cluster_for(pool: Sequence[Cluster], config: Config) -> Cluster:
    """The first cluster of ``pool`` that :meth:`Cluster.fits` ``config``; :class:`NoClusterFits`
    when none does (never a silent fallback to a cluster of another size)."""
    for cluster in pool:
        if cluster.fits(config):
            return cluster
    names = ", ".join(f"{c.name} ({c.gpus} GPUs)" for c in pool)
    raise NoClusterFits(f"{config.id}: needs {config.gpus} GPUs; no cluster fits: {names}")
