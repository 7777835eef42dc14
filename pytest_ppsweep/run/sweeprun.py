"""One run of a sweep: boot a configuration, measure it, tear it down, keep the evidence.

This is what the pytest fixtures call; it has no pytest import so it can be driven from a script.
:class:`SweepRun` is the facade of the steps, each in its module of this package: the lifecycle
(boot and teardown), the rounds and their workload, the profile window and the all-reduce
benchmark. Every step writes its evidence into the run folder
(:mod:`pytest_ppsweep.measure.runstore`) as soon as it has it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep, cluster_for
from pytest_ppsweep.measure.gpu import GpuMemory
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.phases import PhaseClock
from pytest_ppsweep.measure.runstore import RunStore
from pytest_ppsweep.measure.snapshots import GpuSnapshots
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.boots import Boots
from pytest_ppsweep.run.comm_step import CommStep
from pytest_ppsweep.run.lifecycle import Lifecycle
from pytest_ppsweep.run.live import LiveStatus, NoStatus
from pytest_ppsweep.run.outputs_step import OutputsStep
from pytest_ppsweep.run.profile_step import ProfileStep
from pytest_ppsweep.run.rounds import Rounds, ThirdRepeat, Workloads
from pytest_ppsweep.run.slo_search import SloSearch
from pytest_ppsweep.service.logscan import Finding

if TYPE_CHECKING:
    from pytest_ppsweep.comm.runner import DomainRun
    from pytest_ppsweep.measure.slosearch import SearchOutcome
    from pytest_ppsweep.profile.attribution import LayoutProfile

__all__ = ["SweepRun"]


class SweepRun:
    """Boots, measures and tears down the configurations of one sweep on one cluster."""

    def __init__(
        self,
        sweep: Sweep,
        clusters: Sequence[Cluster],
        store: RunStore,
        progress: Callable[[str], None] = lambda _m: None,
        *,
        registry: Registry | None = None,
        done: Iterable[tuple[str, int, int]] = (),
        compare_ref: Path | None = None,
        thresholds: Mapping[str, Any] | None = None,
        live: LiveStatus | None = None,
    ) -> None:
        """``registry`` holds the live ranks and connections (the caller closes it; a run
        without one has its own, closed by :meth:`close`); ``done``: rounds finished before a
        resume; ``compare_ref`` and ``thresholds``: the gate's reference and thresholds;
        ``live`` shows each layout's status while it boots, runs a round and stops."""
        self.sweep = sweep
        # The clusters this process may boot on: the pool, or under xdist the leased one.
        self.clusters = tuple(clusters)
        self.store = store
        self.progress = progress
        self.live: LiveStatus = live if live is not None else NoStatus()
        self._own_registry = registry is None
        self.registry = registry if registry is not None else Registry()
        self.compare_ref = compare_ref
        self.thresholds: dict[str, Any] = dict(thresholds or {})
        self.phases = PhaseClock()  # where each layout's cluster time goes (metadata/phases.json)
        self.snapshots = GpuSnapshots(store, self.phases, self.registry)
        self.workloads = Workloads(sweep)
        self.lifecycle = Lifecycle(sweep, self.clusters, store, self.registry, self.snapshots,
                                   self.workloads, self.phases, progress, self.live)
        self.boots = Boots(self.lifecycle, store, progress)  # one per server configuration
        self.rounds = Rounds(sweep, store, self.workloads, self.snapshots, self.phases,
                             progress, self.live, done)
        self.profiler = ProfileStep(sweep, store, self.registry, self.workloads.spec, progress,
                                    self.lifecycle.worked)
        self.comm_step = CommStep(sweep, store, self.registry, self.lifecycle, progress,
                                  self.live)
        self.slo = SloSearch(sweep, store, self.workloads, self.rounds, progress, self.live,
                             self.lifecycle.worked)
        # [correctness]: the outputs probe, once per boot (run/outputs_step.py)
        self.outputs = OutputsStep(sweep, store, progress)

    # -- what the run measures ------------------------------------------------------------------

    @property
    def done(self) -> frozenset[tuple[str, int, int]]:
        """The rounds finished before a resume (kept, not run again)."""
        return self.rounds.done

    @property
    def third_repeat(self) -> ThirdRepeat | None:
        """--ppsweep-adaptive: (config id, C, Input TPS of 2 repeats) -> why the 3rd is skipped."""
        return self.rounds.third_repeat

    @third_repeat.setter
    def third_repeat(self, gate: ThirdRepeat | None) -> None:
        self.rounds.third_repeat = gate

    @property
    def spec(self) -> WorkloadSpec:
        """The sweep's workload as the load generator takes it."""
        return self.workloads.spec

    @property
    def prompts(self) -> PromptSet:
        return self.workloads.prompts

    def workload_for(self, config: Config) -> tuple[WorkloadSpec, PromptSet]:
        """The spec and prompt set of the workload ``config`` measures."""
        return self.workloads.workload_for(config)

    def use_clusters(self, clusters: Sequence[Cluster]) -> None:
        """The clusters once their nodes are known (a slurm cluster's, from its allocation,
        made after the run was set up: session/setup.py)."""
        self.clusters = tuple(clusters)
        self.lifecycle.clusters = self.clusters

    @property
    def cluster(self) -> Cluster:
        """The first (under xdist: the only) cluster of this process."""
        return self.clusters[0]

    def cluster_for(self, config: Config) -> Cluster:
        """The first cluster that fits the layout (``matrix.model.cluster_for``)."""
        return cluster_for(self.clusters, config)

    def server_args(self, config: Config) -> dict[str, Any]:
        """The server arguments ``config`` boots with (``Sweep.server_args``)."""
        return self.sweep.server_args(config)

    # -- the steps ------------------------------------------------------------------------------

    def snapshot_gpus(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory]:
        """nvidia-smi on every node at once; written to ``gpu/<config>/<moment>.csv``
        (``measure.snapshots``)."""
        return self.snapshots.take(cluster, config_id, moment)

    def boot(self, config: Config) -> Booted:
        """Start every rank, wait for health, read the topology; raise BootFailed on failure."""
        return self.lifecycle.boot(config)

    def acquire(self, config: Config) -> Booted:
        """The boot ``config`` is measured on: one per server configuration
        (``matrix.model.server_key``), shared by the points that differ only in their workload
        (run/boots.py); raise BootFailed when it failed."""
        return self.boots.acquire(config)

    def release(self, config: Config) -> None:
        """``config``'s tests are done: its boot stops after the last point of its server
        configuration."""
        self.boots.release(config)

    def slo_search(self, booted: Booted) -> SearchOutcome:
        """The highest load within the workload's SLO on this boot (run/slo_search.py): bounded
        probes, the final load repeated; slo_probes.csv and slo/<layout>.json as produced."""
        return self.slo.run(booted)

    def teardown(self, booted: Booted) -> None:
        """Record what the layout's logs and GPU memory show after its tests, then stop it."""
        self.lifecycle.teardown(booted)

    def after_stop(self, cluster: Cluster, config_id: str, before: list[GpuMemory]) -> None:
        """The GPUs after cleanup, with a warning when they are not back to ``before``."""
        self.lifecycle.after_stop(cluster, config_id, before)

    def worked(self, config_id: str, seconds: float) -> None:
        """A test of ``config_id`` used its service for ``seconds``."""
        self.lifecycle.worked(config_id, seconds)

    def run_rounds(self, booted: Booted, concurrency: int) -> list[RoundResult]:
        """All repeats of one concurrency; every round is on disk before the next starts."""
        return self.rounds.run_rounds(booted, concurrency)

    def profile_round(self, booted: Booted) -> LayoutProfile:
        """The profile window of a booted layout (``run.profile_step``)."""
        return self.profiler.profile_round(booted)

    def probe_outputs(self, booted: Booted) -> Path:
        """The ``[correctness]`` prompts, greedy with logprobs, once per boot: the layout's
        ``outputs/<layout>.json`` (``run.outputs_step``)."""
        return self.outputs.probe(booted)

    def comm(self, config: Config) -> list[DomainRun]:
        """The all-reduce benchmark on each TP domain of ``config`` (``run.comm_step``)."""
        return self.comm_step.comm(config)

    def record_logs(self, config_id: str, findings: list[Finding]) -> None:
        self.lifecycle.record_logs(config_id, findings)

    def record_memory(self, config_id: str, gpus: list[GpuMemory]) -> None:
        self.lifecycle.record_memory(config_id, gpus)

    def close(self) -> None:
        """Stop what is left and close the connections, when the run owns its registry."""
        if self._own_registry:
            self.registry.close()
