"""A layout's life on its cluster: boot (launch → wait → server info → record) and teardown
(log scan, GPU memory, stop, cleanup check), with the cluster time each layout holds and where
that time goes (``metadata/phases.json``). The log scan and the GPU snapshots are kept per server
group (measure/groupfacts.py): configs.csv gets the whole layout's, a layout of several groups
``metadata/<layout>.groups.json`` beside."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Any

import requests

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.gpus import GpuMemory
from pytest_ppsweep.cluster.rankspec import rank_specs
from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import PHASES_JSON, RunJson, server_info_json
from pytest_ppsweep.matrix.model import Cluster, Config
from pytest_ppsweep.measure.configrow import ConfigRow
from pytest_ppsweep.measure.gpu import not_released, worst_rank
from pytest_ppsweep.measure.groupfacts import LayoutFacts
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
        # per layout, per server group, over its boots in this process ([sweep] boots): the
        # fatal log lines found (configs.csv's log scan is clean only when every boot's logs
        # were) and the most loaded GPU at each moment (the worst is the layout's headroom)
        self._facts: dict[str, LayoutFacts] = {}
        # per layout: each server group's label and the cluster cut to its nodes (one
        # unlabelled part for a single serve group): the GPU snapshots are taken per group
        self._parts: dict[str, list[tuple[str, Cluster]]] = {}
        # per layout of several groups being booted: each group's topology and nodes
        self._group_topologies: dict[str, dict[str, tuple[Topology, int]]] = {}

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
        self.place(config, cluster)
        before = self._snapshot(cluster, sid, "before")
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

    def place(self, config: Config, cluster: Cluster) -> None:
        """Where each server group of ``config`` runs on ``cluster``: what its GPU snapshots ask,
        and its per-group facts' placement (written for a layout of several groups)."""
        sid = config.id
        self._parts[sid] = cluster.group_parts(config)
        facts = self._facts.get(sid, LayoutFacts(sid))
        for (label, part), group in zip(self._parts[sid], config.deployment.groups, strict=True):
            facts = facts.placed(label, group.role, group.shape, [h.name for h in part.hosts])
        self._facts[sid] = facts
        self._write_facts(sid)

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
        parts = self._parts_of(cluster, sid)
        healthy = [self.ctx.snapshots.aside(part, sid, _moment(label, "healthy"))  # alongside
                   for label, part in parts]  # the server info
        try:
            try:
                # the lead group's head
                lead = service.groups[0]
                info = server_info(lead.url(0), engine=engine_of(config.engine),
                                   log=lead.log_path(0))
            except (ValueError, requests.RequestException) as exc:
                # Healthy, but its server info is unusable: a boot failure that says why, told
                # as every other one (service.readiness.boot_failure: node0 named, its tail).
                head = service.specs[0]
                failed = boot_failure(service, f"rank 0 (node0 {head.host}) server info: {exc}",
                                      service.findings())
                row.boot_failed(_scaled(service.boot_s, _launched_scale(service)), failed.reason)
                raise failed from None
            self.ctx.store.write_json(server_info_json(sid), redact(info))
            topo = topology(info, engine_of(config.engine))
            # The plugin's own record of the checks that resume and the report rely on; the
            # user's tests assert what they like.
            if config.deployed is None:
                server = self.ctx.sweep.server_args(config)
                wrong = topology_problems(config, server, topo, len(cluster.hosts))
            else:
                try:
                    wrong = self._groups_topology(service, info, topo)
                except BootFailed as failed:
                    row.boot_failed(_scaled(service.boot_s, _launched_scale(service)),
                                    failed.reason)
                    raise
            row.topology(not wrong)
            RunJson(self.ctx.store).server(topo.version, topo.simulated, topo.time_scale)
            self.ctx.phases.add(sid, "server info", time.perf_counter() - info_started)
            for (label, _part), future in zip(parts, healthy, strict=True):
                self.record_memory(sid, future.result(), label, "healthy")
        except BaseException:
            futures_wait(healthy)  # the snapshots end before the ranks stop
            self._stop(service)
            self._given_up(cluster, sid, before, started)
            raise
        return info, topo

    def _groups_topology(self, service: Service, lead_info: dict[str, Any],
                         lead_topo: Topology) -> list[str]:
        """Each server group of a layout of several checked against its own shape, from its
        head node's server info (the lead group's already read: ``lead_info``); every group's
        info is kept as ``metadata/<config>.<group>.server_info.json``, its topology for the
        layout's Booted (``group_topologies``)."""
        config = service.config
        engine = engine_of(config.engine)
        found: dict[str, tuple[Topology, int]] = {}
        for i, (gs, group) in enumerate(zip(service.groups, config.deployment.groups,
                                            strict=True)):
            info, topo = (lead_info, lead_topo) if i == 0 else (
                _group_info(service, gs.url(0), gs.log_path(0), engine))
            self.ctx.store.write_json(server_info_json(f"{config.id}.{group.label}"),
                                      redact(info))
            found[group.label] = (topo, len(gs.specs))
        self._group_topologies[config.id] = found
        return topology_problems(config, self.ctx.sweep.server_args(config), lead_topo,
                                 len(service.cluster.hosts), groups=found)

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
        workload = self.ctx.sweep.workload_of(service.config)
        row.kv_capacity(topo.max_total_tokens, workload.input_len + workload.output_len)
        self.held(sid, started)
        booted = Booted(service, service.cluster, info, topo, before,
                        group_topologies=self._group_topologies.pop(sid, {}))
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
                    for scan in booted.service.log_scans():
                        self.record_logs(sid, scan.findings, scan.label, scan.role)
                if booted.cluster.nvidia_smi:
                    self._snapshot(booted.cluster, sid, "after")
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
            cleaned = self._snapshot(cluster, config_id, "cleaned")
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

    def _parts_of(self, cluster: Cluster, config_id: str) -> list[tuple[str, Cluster]]:
        return self._parts.get(config_id) or [("", cluster)]

    def _snapshot(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory]:
        """The layout's GPUs at ``moment``, one snapshot per server group
        (``gpu/<config>/<moment>.csv``; ``<group>-<moment>.csv`` in a layout of several), each
        group's worst rank recorded."""
        out: list[GpuMemory] = []
        for label, part in self._parts_of(cluster, config_id):
            gpus = self.ctx.snapshots.take(part, config_id, _moment(label, moment))
            self.record_memory(config_id, gpus, label, moment)
            out += gpus
        return out

    # -- what the layout cost and left ----------------------------------------------------------

    def held(self, config_id: str, started: float) -> None:
        """The cluster time a layout needs: its boot, its tests and its teardown, without the
        waits between them (an xdist worker may idle with a layout still up). A later run's
        pool plan is made from it (pytest_ppsweep.pool.balance). Real seconds, on the emulator
        too: it is what the layout costs the cluster, unlike boot_s (emulated there)."""
        self.ctx.cluster_time.worked(config_id, time.monotonic() - started)
        ConfigRow(self.ctx.store, config_id).held(self.ctx.cluster_time.of(config_id))

    def record_logs(self, config_id: str, findings: Sequence[Finding], group: str = "",
                    role: str = "") -> None:
        """One part's log scan of one boot (``group``: its label, "" for a single serve group;
        ``role``: its role, for a part not placed at the launch: the router), added over every
        boot of the layout in this process; configs.csv gets the whole layout's count
        (LayoutFacts.fatal_lines)."""
        facts = self._facts.get(config_id, LayoutFacts(config_id))
        facts = self._facts[config_id] = facts.scanned(group, [_line(f) for f in findings], role)
        ConfigRow(self.ctx.store, config_id).logs(facts.fatal_lines())
        self._write_facts(config_id)

    def record_memory(self, config_id: str, gpus: Sequence[GpuMemory], group: str = "",
                      moment: str = "after") -> None:
        """One group's GPUs at ``moment`` of one boot: its worst rank, the most loaded over the
        layout's boots in this process; after the benchmark, configs.csv gets the whole
        layout's (LayoutFacts.worst)."""
        worst = worst_rank(gpus)
        if worst is None:
            return
        facts = self._facts.get(config_id, LayoutFacts(config_id))
        facts = self._facts[config_id] = facts.measured(group, moment, worst)
        layout = facts.worst(moment)
        if moment == "after" and layout is not None:
            ConfigRow(self.ctx.store, config_id).memory(layout)
        self._write_facts(config_id)

    def share_facts(self, source: str, target: str) -> None:
        """A point measured on ``source``'s boot gets its per-group facts (run/boots.py)."""
        facts = self._facts.get(source)
        if facts is not None:
            LayoutFacts(target, facts.groups).write(self.ctx.store)

    def _write_facts(self, config_id: str) -> None:
        """The layout's per-group facts so far, when it has several groups."""
        facts = self._facts.get(config_id)
        if facts is not None:
            facts.write(self.ctx.store)


def _line(finding: Finding) -> str:
    """A fatal line as the per-group facts keep it: its log file's name (which names the group
    and node), its line number, its kind and the line (cut at 200 characters)."""
    text = f"{Path(finding.source).name}:{finding.line_no}: [{finding.kind}] {finding.line}"
    return text if len(text) <= 200 else text[:199] + "…"


def _moment(group: str, moment: str) -> str:
    """A snapshot's name: the moment, after its group's label in a layout of several groups."""
    return f"{group}-{moment}" if group else moment


def _group_info(service: Service, url: str, log: Path, engine: Engine
                ) -> tuple[dict[str, Any], Topology]:
    """A server group's head's server info and topology; a boot failure naming the group when
    it is unusable."""
    try:
        info = server_info(url, engine=engine, log=log)
    except (ValueError, requests.RequestException) as exc:
        raise boot_failure(service, f"{url} server info: {exc}", service.findings()) from None
    return info, topology(info, engine)


def _scaled(seconds: float | None, time_scale: float) -> float | None:
    """Real seconds measured here → the run's time (emulated seconds on the emulator)."""
    return None if seconds is None else round(seconds * time_scale, 3)


def _launched_scale(service: Service) -> float:
    """The time scale when the server info was not read (a failed boot): what the emulator's
    banner in rank 0's log says (contract: its first line), 1.0 for a real server."""
    return simulated_time_scale(service.log_path(0)) or 1.0
