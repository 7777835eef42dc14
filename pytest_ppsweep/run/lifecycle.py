"""A layout's life on its cluster: boot (launch → wait → server info → record) and teardown
(log scan, GPU memory, stop, cleanup check), with the cluster time each layout holds and where
that time goes (``metadata/phases.json``)."""

from __future__ import annotations

import time
import warnings
from concurrent.futures import wait as futures_wait
from typing import Any

import requests

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.gpus import GpuMemory
from pytest_ppsweep.cluster.rankspec import rank_specs
from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import PHASES_JSON, RunJson, server_info_json
from pytest_ppsweep.matrix.model import Cluster, Config
from pytest_ppsweep.measure.configrow import ConfigRow
from pytest_ppsweep.measure.gpu import WorstRank, not_released, worst_rank
from pytest_ppsweep.pointchecks import topology_problems
from pytest_ppsweep.redact import redact
from pytest_ppsweep.results.runstatus import INTERRUPTED_BOOT
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.live import boot_status
from pytest_ppsweep.service.launch import Service
from pytest_ppsweep.service.logscan import Finding, simulated_time_scale
from pytest_ppsweep.service.probe import Topology, server_info, topology
from pytest_ppsweep.service.readiness import BootFailed, BootStatus, boot_failure

__all__ = ["GpuMemoryWarning", "Lifecycle"]


class GpuMemoryWarning(UserWarning):
    """GPU memory did not return to its before-boot level after a configuration was stopped."""


class Lifecycle:
    """Boots and tears down the layouts of one sweep on its clusters; keeps the layouts that
    are up and the cluster time each one held."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.up: dict[str, Booted] = {}  # layouts booted and not yet torn down (comm stops one)
        # fatal log lines found so far per layout over its boots in this process ([sweep]
        # boots): configs.csv's log scan is clean only when every boot's logs were
        self._findings: dict[str, int] = {}
        # and the most loaded GPU over its boots (the worst of them is the layout's headroom)
        self._worst: dict[str, WorstRank] = {}

    def cluster_for(self, config: Config) -> Cluster:
        """The first cluster that fits the layout (``matrix.model.cluster_for``)."""
        return self.ctx.clusters.cluster_for(config)

    # -- boot -----------------------------------------------------------------------------------

    def boot(self, config: Config, boot_no: int = 1) -> Booted:
        """Start every rank, wait for health, read the topology; raise BootFailed on failure
        (ClusterStop: the cluster cannot take the layout, and the sweep stops resumable).
        ``boot_no``: which of the layout's boots in this run ([sweep] boots)."""
        self._limits(config)
        started = time.monotonic()
        row = ConfigRow(self.ctx.store, config.id)
        service, before = self._launch(config, row, boot_no)
        self._wait(service, before, row, started)
        info, topo = self._server_info(service, before, row, started)
        return self._record(service, info, topo, before, row, started)

    def _limits(self, config: Config) -> None:
        """The cluster's word before the layout starts, given its ETA (an allocation that ends
        too soon or lost a node is renewed, or ClusterStop: ``Backend.before_layout``)."""
        cluster = self.cluster_for(config)
        fresh = backend_of(cluster).before_layout(
            self.ctx.live.eta_s(config.id), self.ctx.store.run_id, self.ctx.registry,
            self.ctx.progress)
        if fresh is not cluster:
            self.ctx.clusters.replace(fresh)

    def _launch(self, config: Config, row: ConfigRow,
                boot_no: int = 1) -> tuple[Service, list[GpuMemory]]:
        """The layout's row, its cluster and manifest, the GPUs before it, and its service."""
        sid = config.id
        row.planned(config)
        cluster = self.cluster_for(config)
        row.placed(cluster.name)
        # Written before the boot, so a resumed or reusing run compares like with like.
        specs = rank_specs(self.ctx.sweep, cluster, config)  # once: the manifest and the launch
        manifest.write(self.ctx.store.dir, sid,
                       manifest.build(self.ctx.sweep, cluster, config, specs=specs))
        before = self.ctx.snapshots.take(cluster, sid, "before")
        service = Service(
            self.ctx.sweep,
            cluster,
            config,
            self.ctx.store.service_dir(sid),
            progress=self.ctx.progress,
            run_id=self.ctx.store.run_id,
            registry=self.ctx.registry,
            on_status=lambda status: self._booting(config, status),
            specs=specs,
        )
        boots = self.ctx.sweep.boots
        which = f" (boot {boot_no} of {boots})" if boots > 1 else ""
        self.ctx.progress(f"{sid}: booting on {len(cluster.hosts)} nodes of {cluster.name}{which}")
        return service, before

    def _wait(self, service: Service, before: list[GpuMemory], row: ConfigRow,
              started: float) -> None:
        """Every rank started and healthy; a boot failure is recorded and cleaned up."""
        sid = service.config.id
        self.ctx.live.begin(sid)
        try:
            try:
                self._enter(service)
            finally:
                self.ctx.live.end(sid)
        except BootFailed as exc:
            self.ctx.live.took(sid, "failed", service.boot_s)
            row.boot_failed(_scaled(service.boot_s, _launched_scale(service)), exc.reason)
            self._given_up(service.cluster, sid, before, started)
            raise
        except KeyboardInterrupt:
            # Ctrl-C/SIGTERM/SIGHUP during the boot: the layout was interrupted, not failed (a
            # resume boots it again)
            row.boot_failed(None, INTERRUPTED_BOOT)
            raise
        self.ctx.live.took(sid, "boot", service.boot_s)

    def _server_info(self, service: Service, before: list[GpuMemory], row: ConfigRow,
                     started: float) -> tuple[dict[str, Any], Topology]:
        """The healthy server's info and topology, checked against the matrix (the GPUs'
        ``healthy`` snapshot meanwhile); anything wrong stops the layout."""
        sid, config, cluster = service.config.id, service.config, service.cluster
        info_started = time.perf_counter()
        healthy = self.ctx.snapshots.aside(cluster, sid, "healthy")  # alongside the server info
        try:
            try:
                info = server_info(service.base_url)
            except (ValueError, requests.RequestException) as exc:
                # Healthy, but its server info is unusable: a boot failure that says why, told
                # as every other one (service.readiness.boot_failure: node0 named, its tail).
                head = service.specs[0]
                failed = boot_failure(service, f"rank 0 (node0 {head.host}) server info: {exc}",
                                      service.findings())
                row.boot_failed(_scaled(service.boot_s, _launched_scale(service)), failed.reason)
                raise failed from None
            self.ctx.store.write_json(server_info_json(sid), redact(info))
            topo = topology(info)
            # The plugin's own record of the checks that resume and the report rely on; the
            # user's tests assert what they like.
            server = self.ctx.sweep.server_args(config)
            wrong = topology_problems(config, server, topo, len(cluster.hosts))
            row.topology(not wrong)
            RunJson(self.ctx.store).server(topo.version, topo.simulated, topo.time_scale)
            self.ctx.phases.add(sid, "server info", time.perf_counter() - info_started)
            healthy.result()
        except BaseException:
            futures_wait([healthy])  # the snapshot ends before the ranks stop
            self._stop(service)
            self._given_up(cluster, sid, before, started)
            raise
        return info, topo

    def _record(self, service: Service, info: dict[str, Any], topo: Topology,
                before: list[GpuMemory], row: ConfigRow, started: float) -> Booted:
        """The boot's facts in configs.csv; the layout is up."""
        sid = service.config.id
        # Emulated seconds on the emulator, as every time of results.csv (held_s stays real).
        boot_s = _scaled(service.boot_s, topo.time_scale)
        if topo.simulated and boot_s is not None and service.boot_s is not None:
            self.ctx.progress(
                f"{sid}: startup {boot_s:.0f} s emulated ({service.boot_s:.1f} s real "
                f"× {topo.time_scale:g})"
            )
        row.booted(boot_s, topo.pp_max_micro_batch_size)
        self.held(sid, started)
        booted = Booted(service, service.cluster, info, topo, before)
        self.up[sid] = booted
        return booted

    def _given_up(self, cluster: Cluster, config_id: str, before: list[GpuMemory],
                  started: float) -> None:
        """A boot that failed: the GPUs checked after the stop, its time recorded."""
        self.after_stop(cluster, config_id, before)
        self.held(config_id, started)
        self._write_phases(config_id)

    def _enter(self, service: Service) -> None:
        """Boot ``service``: its launch and its boot wait go to their phases."""
        sid = service.config.id
        wall, t0 = time.time(), time.perf_counter()
        healthy = False
        self.ctx.snapshots.changed(service.cluster)
        try:
            service.__enter__()
            healthy = True
        finally:
            took = time.perf_counter() - t0
            # healthy: boot_s is the boot wait alone; failed: the whole attempt counts as boot
            waited = min(took, service.boot_s) if healthy and service.boot_s is not None else took
            self.ctx.phases.add(sid, "boot", waited)
            self.ctx.phases.add(sid, "launch", took - waited)
            self.ctx.phases.mark(sid, wall, wall + took)

    def _booting(self, config: Config, status: BootStatus) -> None:
        """Every poll of the boot wait: the status, and the workload made meanwhile (after the
        launch, whose process starts it would slow)."""
        self.ctx.workloads.prepare(config)
        text, state = boot_status(status)
        self.ctx.live.status(status.config_id, text, state=state)

    # -- teardown -------------------------------------------------------------------------------

    def _stop(self, service: Service) -> None:
        self.ctx.snapshots.changed(service.cluster)
        with self.ctx.phases.timed(service.config.id, "teardown"):
            service.stop()

    def _write_phases(self, config_id: str) -> None:
        """The layout's phases so far into ``metadata/phases.json`` (measure.phases)."""
        self.ctx.store.update_json(PHASES_JSON, **{config_id: self.ctx.phases.row(config_id)})

    def teardown(self, booted: Booted) -> None:
        """Record what the layout's logs and GPU memory show after its tests, then stop it."""
        started = time.monotonic()
        sid = booted.service.config.id
        if self.up.get(sid) is not booted:
            return  # torn down already (test_comm stops the service before it measures)
        del self.up[sid]
        ranks = len(booted.service.specs)
        try:
            try:
                self.ctx.live.status(sid, f"{sid} log scan | {ranks} rank logs", state="log scan")
                with self.ctx.phases.timed(sid, "log scan"):
                    self.record_logs(sid, booted.service.findings())
                if booted.cluster.nvidia_smi:
                    self.record_memory(sid, self.ctx.snapshots.take(booted.cluster, sid, "after"))
            except (HostError, ValueError, OSError) as exc:
                warnings.warn(
                    f"{sid}: no record after the tests: {exc}", GpuMemoryWarning, stacklevel=2
                )
            finally:
                self.ctx.live.status(sid, f"{sid} teardown | stopping {ranks} ranks",
                                     state="teardown")
                self._stop(booted.service)
            self.after_stop(booted.cluster, booted.service.config.id, booted.before)
        finally:
            self.ctx.live.end(sid)
        self.held(booted.service.config.id, started)
        self._write_phases(sid)

    def after_stop(self, cluster: Cluster, config_id: str, before: list[GpuMemory]) -> None:
        try:
            cleaned = self.ctx.snapshots.take(cluster, config_id, "cleaned")
        except (HostError, ValueError, OSError) as exc:  # OSError: the run folder's disk full
            warnings.warn(
                f"{config_id}: no GPU snapshot after cleanup: {exc}", GpuMemoryWarning, stacklevel=2
            )
            return
        leftover = not_released(before, cleaned)
        if leftover:
            warnings.warn(
                f"{config_id}: GPU memory not back to its before-boot level: "
                + "; ".join(leftover),
                GpuMemoryWarning,
                stacklevel=2,
            )

    # -- what the layout cost and left ----------------------------------------------------------

    def held(self, config_id: str, started: float) -> None:
        """The cluster time a layout needs: its boot, its tests and its teardown, without the
        waits between them (an xdist worker may idle with a layout still up). A later run's
        pool plan is made from it (pytest_ppsweep.pool.balance). Real seconds, on the emulator
        too: it is what the layout costs the cluster, unlike boot_s (emulated there)."""
        self.ctx.cluster_time.worked(config_id, time.monotonic() - started)
        ConfigRow(self.ctx.store, config_id).held(self.ctx.cluster_time.of(config_id))

    def record_logs(self, config_id: str, findings: list[Finding]) -> None:
        """The log scan's count, over every boot of the layout in this process."""
        self._findings[config_id] = self._findings.get(config_id, 0) + len(findings)
        ConfigRow(self.ctx.store, config_id).logs(self._findings[config_id])

    def record_memory(self, config_id: str, gpus: list[GpuMemory]) -> None:
        worst = worst_rank(gpus)
        if worst is None:
            return
        earlier = self._worst.get(config_id)
        if earlier is not None and earlier.used_mib > worst.used_mib:
            worst = earlier
        self._worst[config_id] = worst
        ConfigRow(self.ctx.store, config_id).memory(worst)


def _scaled(seconds: float | None, time_scale: float) -> float | None:
    """Real seconds measured here → the run's time (emulated seconds on the emulator)."""
    return None if seconds is None else round(seconds * time_scale, 3)


def _launched_scale(service: Service) -> float:
    """The time scale when the server info was not read (a failed boot): what the emulator's
    banner in rank 0's log says (contract: its first line), 1.0 for a real server."""
    return simulated_time_scale(service.log_path(0)) or 1.0
