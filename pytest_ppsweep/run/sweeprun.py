"""One run of a sweep: boot a configuration, measure it, tear it down, keep the evidence.

This is what the pytest fixtures call; it has no pytest import so it can be driven from a script.
:class:`SweepRun` is the facade of the steps, each in its module of this package: the lifecycle
(boot and teardown), the rounds and their workload, the profile window and the all-reduce
benchmark. Every step writes its evidence into the run folder
(:mod:`pytest_ppsweep.folder.runfolder`) as soon as it has it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ppsweep.cluster.gpus import GpuMemory
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec
from pytest_ppsweep.run.accuracy_step import AccuracyStep
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.boots import Boots
from pytest_ppsweep.run.comm_step import CommStep
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.lifecycle import Lifecycle
from pytest_ppsweep.run.live import LiveStatus
from pytest_ppsweep.run.outputs_step import OutputsStep
from pytest_ppsweep.run.profile_step import ProfileStep
from pytest_ppsweep.run.rounds import Rounds
from pytest_ppsweep.run.slo_search import SloSearch

if TYPE_CHECKING:
    from collections.abc import Callable

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
        self._own_registry = registry is None
        # What every step shares, built once (run/context.py).
        self.context = RunContext.build(
            sweep, clusters, store, registry if registry is not None else Registry(), progress,
            live)
        self.compare_ref = compare_ref
        self.thresholds: dict[str, Any] = dict(thresholds or {})
        ctx = self.context
        self.lifecycle = Lifecycle(ctx)
        self.boots = Boots(ctx, self.lifecycle)  # one per server configuration
        self.rounds = Rounds(ctx, done)
        self.profiler = ProfileStep(ctx)
        self.comm_step = CommStep(ctx, self.lifecycle)
        self.slo = SloSearch(ctx, self.rounds)
        # [correctness]: the outputs probe, once per boot (run/outputs_step.py)
        self.outputs = OutputsStep(ctx)
        # [accuracy]: the task score, once per boot (run/accuracy_step.py)
        self.accuracy = AccuracyStep(ctx, compare_ref)

    # -- what a sweep's tests read ------------------------------------------------------------

    @property
    def sweep(self) -> Sweep:
        return self.context.sweep

    @property
    def store(self) -> RunStore:
        return self.context.store

    def cluster_for(self, config: Config) -> Cluster:
        """The first cluster that fits the layout (``matrix.model.cluster_for``)."""
        return self.context.clusters.cluster_for(config)

    def workload_for(self, config: Config) -> tuple[WorkloadSpec, PromptSet]:
        """The spec and prompt set of the workload ``config`` measures."""
        return self.context.workloads.workload_for(config)

    def server_args(self, config: Config) -> dict[str, Any]:
        """The server arguments ``config`` boots with (``Sweep.server_args``)."""
        return self.context.sweep.server_args(config)

    # -- the steps ------------------------------------------------------------------------------

    def snapshot_gpus(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory]:
        """nvidia-smi on every node at once; written to ``gpu/<config>/<moment>.csv``
        (``measure.snapshots``)."""
        return self.context.snapshots.take(cluster, config_id, moment)

    def boot(self, config: Config) -> Booted:
        """Start every rank, wait for health, read the topology; raise BootFailed on failure."""
        return self.lifecycle.boot(config)

    def acquire(self, config: Config, boot_no: int = 1) -> Booted:
        """The boot ``config`` is measured on: one per server configuration
        (``matrix.model.server_key``) and boot number (``[sweep] boots``), shared by the points
        that differ only in their workload (run/boots.py); raise BootFailed when it failed."""
        return self.boots.acquire(config, boot_no)

    def release(self, config: Config, boot_no: int = 1) -> None:
        """``config``'s tests on its boot ``boot_no`` are done: the boot stops after the last
        point of its server configuration."""
        self.boots.release(config, boot_no)

    def slo_search(self, booted: Booted) -> SearchOutcome:
        """The highest load within the workload's SLO on this boot (run/slo_search.py): bounded
        probes, the final load repeated; slo_probes.csv and slo/<layout>.json as produced."""
        return self.slo.run(booted)

    def teardown(self, booted: Booted) -> None:
        """Record what the layout's logs and GPU memory show after its tests, then stop it."""
        self.lifecycle.teardown(booted)

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

    def check_accuracy(self, booted: Booted) -> Path:
        """The ``[accuracy]`` questions, greedy through ``/v1/completions`` (or lm-eval), once
        per boot: the layout's ``accuracy/<layout>.json`` (``run.accuracy_step``)."""
        return self.accuracy.check(booted)

    def comm(self, config: Config) -> list[DomainRun]:
        """The all-reduce benchmark on each TP domain of ``config`` (``run.comm_step``)."""
        return self.comm_step.comm(config)

    def close(self) -> None:
        """Stop what is left and close the connections, when the run owns its registry."""
        if self._own_registry:
            self.context.registry.close()
