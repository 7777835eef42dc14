"""One run of a sweep: boot a configuration, measure it, tear it down, keep the evidence.

This is what the pytest fixtures call; it has no pytest import so it can be driven from a script.
Every step writes its evidence into the run folder (:mod:`pytest_ppsweep.runstore`) as soon as
it has it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import requests

from pytest_ppsweep.check import topology_problems
from pytest_ppsweep.cluster.backends import host_for
from pytest_ppsweep.cluster.base import HostError
from pytest_ppsweep.cluster.nodeinfo import smi_command
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.matrix.model import Cluster, Config, ProfileSpec, Sweep, Workload, cluster_for
from pytest_ppsweep.measure import bench
from pytest_ppsweep.measure.gpu import (
    HOSTS_PLACEHOLDER,
    QUERY_ARGS,
    GpuMemory,
    not_released,
    parse_query_gpu,
    split_nodes,
    worst_rank,
)
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.measure.phases import PhaseClock, warmup_span
from pytest_ppsweep.measure.runstore import RunStore
from pytest_ppsweep.measure.workload import PromptSet, WorkloadSpec, generate_prompts
from pytest_ppsweep.profile import attribution, collect, summary, trace, window
from pytest_ppsweep.redact import redact
from pytest_ppsweep.service.launch import LayoutDead, Service
from pytest_ppsweep.service.logscan import Finding, simulated_time_scale
from pytest_ppsweep.service.probe import Topology, server_info, topology
from pytest_ppsweep.service.readiness import BootFailed, BootStatus

if TYPE_CHECKING:
    from pytest_ppsweep.comm.runner import DomainRun


class LiveStatus(Protocol):
    """Where a layout's status goes while it boots, runs a round or is torn down (the plugin's
    progress.Progress: a line rewritten in place on a terminal, changes in progress.log)."""

    def status(self, key: str, text: str, *, state: str | None = None) -> None: ...

    def end(self, key: str) -> None: ...


class _NoStatus:
    def status(self, key: str, text: str, *, state: str | None = None) -> None:
        pass

    def end(self, key: str) -> None:
        pass


# A round's bar is redrawn at most this often (the per-request callback stays cheap).
BAR_EVERY_S = 0.2
# A GPU snapshot this recent stands for the next moment when nothing ran in between (_unchanged).
REUSE_SNAPSHOT_S = 60.0
BAR_WIDTH = 24


def boot_status(status: BootStatus) -> tuple[str, str]:
    """A booting layout's status text and its state (the text without the clock)."""
    mark = f" | {status.milestone}" if status.milestone else ""
    ranks = f"ranks ready {status.ready}/{status.ranks}{mark}"
    clock = f"{status.elapsed_s:.0f} s / {status.timeout_s:.0f} s"
    return f"{status.config_id} booting {clock} | {ranks}", f"booting | {ranks}"


def round_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[#########...............]`` for ``done`` of ``total``."""
    filled = width * done // total if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"


class GpuMemoryWarning(UserWarning):
    """GPU memory did not return to its before-boot level after a configuration was stopped."""


@dataclass
class Booted:
    """A ready service plus what was learnt while booting it."""

    service: Service
    cluster: Cluster
    info: dict[str, Any]
    topology: Topology
    before: list[GpuMemory] = field(default_factory=list)

    @property
    def dead(self) -> str | None:
        """Why the layout died after it was healthy (a rank's exit, a fatal log line, a rank
        ≥ 1 whose /health stopped answering), or None while every rank lives."""
        return self.service.dead

    def look(self) -> str | None:
        """:attr:`dead`, the ranks looked at now (not only at the watch's last poll)."""
        if self.service.liveness is not None:
            self.service.liveness.check()
        return self.dead

    def check_alive(self) -> None:
        """Raise :class:`LayoutDead` with the cause when a rank died (before each test and
        round; the ranks are looked at now, not only at the watch's last poll)."""
        if (reason := self.look()) is not None:
            raise LayoutDead(f"{self.service.config.id}: layout dead: {reason}")


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
        self.live: LiveStatus = live if live is not None else _NoStatus()
        self._up: dict[str, Booted] = {}  # layouts booted and not yet torn down (comm stops one)
        self.spec = workload_spec(sweep.workload)
        self._prompts: PromptSet | None = None
        self._named_prompts: dict[str, tuple[WorkloadSpec, PromptSet]] = {}
        self._prompts_lock = threading.RLock()  # a booting layout's thread makes them too
        self._own_registry = registry is None
        self.registry = registry if registry is not None else Registry()
        self.done: frozenset[tuple[str, int, int]] = frozenset(done)
        self.compare_ref = compare_ref
        self.thresholds: dict[str, Any] = dict(thresholds or {})
        # --ppsweep-adaptive: (config id, C, Input TPS of 2 repeats) -> why the 3rd is skipped
        self.third_repeat: Callable[[str, int, list[float]], str | None] | None = None
        self._busy: dict[str, float] = {}  # config id → seconds of cluster time so far
        self.phases = PhaseClock()  # where each layout's cluster time goes (metadata/phases.json)
        # cluster name → (config id, moment, GPUs, when) of its newest snapshot, until a boot, a
        # round or a stop may have changed its GPUs (_unchanged/_changed)
        self._latest: dict[str, tuple[str, str, list[GpuMemory], float]] = {}
        self._warmed: set[str] = set()  # boot tokens of the layouts whose server was warmed

    @property
    def prompts(self) -> PromptSet:
        # Generated once per run: identical for every configuration and repeat.
        with self._prompts_lock:
            if self._prompts is None:
                self._prompts = generate_prompts(self.spec)
            return self._prompts

    def workload_for(self, config: Config) -> tuple[WorkloadSpec, PromptSet]:
        """The spec and prompt set of the workload ``config`` measures (its named workload
        when the sweep has several, each generated once per run)."""
        if not config.workload or config.workload not in self.sweep.workloads:
            return self.spec, self.prompts
        with self._prompts_lock:
            if config.workload not in self._named_prompts:
                spec = workload_spec(self.sweep.workloads[config.workload])
                self._named_prompts[config.workload] = (spec, generate_prompts(spec))
            return self._named_prompts[config.workload]

    def _prepare_workload(self, config: Config) -> None:
        """The prompts of ``config``'s workload and their request bodies, made in a thread during
        the boot wait (the cluster works then, the plugin waits) instead of before the first
        round (~35 ms for the seeds' 41 prompts of 16K tokens); once. The completions API's
        bodies need the model name its server gives: they stay the round's."""
        with self._prompts_lock:
            named = config.workload and config.workload in self.sweep.workloads
            if (config.workload in self._named_prompts) if named else self._prompts is not None:
                return

        def prepare() -> None:
            with contextlib.suppress(Exception):  # the round makes them again, and says why not
                spec, prompts = self.workload_for(config)
                if spec.api == "generate":
                    prompts.bodies(spec, None)
                    prompts.bodies(spec, None, warmup=True)

        threading.Thread(target=prepare, name=f"ppsweep-prompts-{config.id}", daemon=True).start()

    @property
    def cluster(self) -> Cluster:
        """The first (under xdist: the only) cluster of this process."""
        return self.clusters[0]

    def cluster_for(self, config: Config) -> Cluster:
        """The first cluster that fits the layout (``matrix.model.cluster_for``)."""
        return cluster_for(self.clusters, config)

    # -- GPU memory ---------------------------------------------------------------------------

    @staticmethod
    def _smi_argv(cluster: Cluster, address: str) -> list[str]:
        return smi_command(cluster, address, QUERY_ARGS)

    def snapshot_gpus(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory]:
        """nvidia-smi on every node at once; written to ``gpu/<config>/<moment>.csv``.

        A cluster whose ``nvidia_smi`` is empty has no GPUs to read (a CPU cluster): [].
        """
        if not cluster.nvidia_smi:
            return []
        with self.phases.timed(config_id, "snapshots"):
            gpus = self._unchanged(cluster, config_id, moment)
            if gpus is None:
                gpus = self._snapshot_gpus(cluster)
            self._latest[cluster.name] = (config_id, moment, gpus, time.monotonic())
            lines = ["node,index,name,memory_used_mib,memory_total_mib"] + [
                f"{g.node},{g.index},{g.name},{g.used_mib},{g.total_mib}" for g in gpus
            ]
            self.store.gpu_path(config_id, moment).write_text("\n".join(lines) + "\n")
            return gpus

    def _snapshot_aside(
        self, cluster: Cluster, config_id: str, moment: str
    ) -> Future[list[GpuMemory]]:
        """:meth:`snapshot_gpus` in a thread of its own, for a moment whose GPUs nobody reads at
        once (``healthy``): the caller does its own work meanwhile (the nvidia-smi process runs
        on another core; on the emulator it is an interpreter's start) and waits for the result
        before anything may change the GPUs."""
        future: Future[list[GpuMemory]] = Future()

        def snapshot() -> None:
            try:
                future.set_result(self.snapshot_gpus(cluster, config_id, moment))
            except BaseException as exc:  # raised where the caller waits
                future.set_exception(exc)

        threading.Thread(target=snapshot, name=f"ppsweep-smi-{config_id}", daemon=True).start()
        return future

    def _unchanged(self, cluster: Cluster, config_id: str, moment: str) -> list[GpuMemory] | None:
        """The cluster's newest snapshot when it stands for ``moment`` too, else None: it is
        less than ``REUSE_SNAPSHOT_S`` old, nothing that changes the GPUs (a boot, a round, a
        stop: :meth:`_changed`) ran since, and it was this layout's "after" (the plugin's
        teardown right after test_gpu_memory) or a layout's "cleaned" (the next layout's
        "before"). Each nvidia-smi costs a process per node, an interpreter on the emulator."""
        latest = self._latest.get(cluster.name)
        if latest is None or time.monotonic() - latest[3] > REUSE_SNAPSHOT_S:
            return None
        taken_for, taken_at, gpus, _when = latest
        if (moment == "after" and taken_at == "after" and taken_for == config_id) or (
            moment == "before" and taken_at == "cleaned"
        ):
            return gpus
        return None

    def _changed(self, cluster: Cluster) -> None:
        """Something may have changed the cluster's GPU memory: snapshot it again."""
        self._latest.pop(cluster.name, None)

    def _snapshot_gpus(self, cluster: Cluster) -> list[GpuMemory]:
        """nvidia-smi on every node at once: one call for a local cluster whose
        ``nvidia_smi`` takes ``{hosts}``, else one per node, concurrently."""
        if _one_call(cluster):
            hosts = cluster.hosts
            argv = self._smi_argv(cluster, ",".join(h.address for h in hosts))
            res = host_for(cluster, hosts[0], self.registry).run(argv, timeout=60)
            if not res.ok:
                raise HostError(
                    f"hosts {', '.join(h.name for h in hosts)}: nvidia-smi exited "
                    f"{res.exit_status}: {res.stderr.strip()}"
                )
            parts = split_nodes(res.stdout, [h.address for h in hosts])
            return [g for h in hosts for g in parse_query_gpu(parts[h.address], h.name)]


        def one(host_index: int) -> list[GpuMemory]:
            h = cluster.hosts[host_index]
            argv = self._smi_argv(cluster, h.address)
            res = host_for(cluster, h, self.registry).run(argv, timeout=60)
            if not res.ok:
                raise HostError(
                    f"host {h.name}: nvidia-smi exited {res.exit_status}: {res.stderr.strip()}"
                )
            return parse_query_gpu(res.stdout, h.name)

        with ThreadPoolExecutor(max_workers=len(cluster.hosts)) as pool:
            per_node = list(pool.map(one, range(len(cluster.hosts))))
        return [g for node in per_node for g in node]

    # -- lifecycle ----------------------------------------------------------------------------

    def boot(self, config: Config) -> Booted:
        """Start every rank, wait for health, read the topology; raise BootFailed on failure."""
        sid = config.id
        started = time.monotonic()
        self.store.update_config(
            sid, pp=config.pp, tp=config.tp, ep=config.ep, order=config.order, boot_ok=False
        )
        cluster = self.cluster_for(config)
        self.store.update_config(sid, cluster=cluster.name)
        # Written before the boot, so a resumed or reusing run compares like with like.
        manifest.write(self.store.dir, sid, manifest.build(self.sweep, cluster, config))
        before = self.snapshot_gpus(cluster, sid, "before")
        service = Service(
            self.sweep,
            cluster,
            config,
            self.store.service_dir(sid),
            progress=self.progress,
            run_id=self.store.run_id,
            registry=self.registry,
            on_status=lambda status: self._booting(config, status),
        )
        self.progress(f"{sid}: booting on {len(cluster.hosts)} nodes of {cluster.name}")
        try:
            try:
                self._enter(service)
            finally:
                self.live.end(sid)
        except BootFailed as exc:
            boot_s = _scaled(service.boot_s, _launched_scale(service))
            self.store.update_config(sid, boot_s=boot_s, boot_error=exc.reason)
            self.after_stop(cluster, sid, before)
            self._held(sid, started)
            self._write_phases(sid)
            raise
        info_started = time.perf_counter()
        healthy = self._snapshot_aside(cluster, sid, "healthy")  # alongside the server info
        try:
            try:
                info = server_info(service.base_url)
            except (ValueError, requests.RequestException) as exc:
                # Healthy, but its server info is unusable: a boot failure that says why.
                head = service.specs[0]
                reason = f"rank 0 (node0 {head.host}) server info: {exc}"
                boot_s = _scaled(service.boot_s, _launched_scale(service))
                self.store.update_config(sid, boot_s=boot_s, boot_error=reason)
                raise BootFailed(
                    f"{sid}: boot failed: {reason}\n{service.log_tail()}", reason=reason
                ) from None
            self.store.write_json(f"metadata/{sid}.server_info.json", redact(info))
            topo = topology(info)
            # The plugin's own record of the checks that resume and the report rely on; the
            # user's tests assert what they like.
            server = {**self.sweep.server, **config.server}
            wrong = topology_problems(config, server, topo, len(cluster.hosts))
            self.store.update_config(sid, topology_ok=not wrong)
            self.store.update_json(
                "metadata/run.json",
                sglang_version=topo.version,
                simulated=topo.simulated,
                time_scale=topo.time_scale,
            )
            self.phases.add(sid, "server info", time.perf_counter() - info_started)
            healthy.result()
        except BaseException:
            futures_wait([healthy])  # the snapshot ends before the ranks stop
            self._stop(service)
            self.after_stop(cluster, sid, before)
            self._held(sid, started)
            self._write_phases(sid)
            raise
        # Emulated seconds on the emulator, as every time of results.csv (held_s stays real).
        boot_s = _scaled(service.boot_s, topo.time_scale)
        if topo.simulated and boot_s is not None and service.boot_s is not None:
            self.progress(
                f"{sid}: startup {boot_s:.0f} s emulated ({service.boot_s:.1f} s real "
                f"× {topo.time_scale:g})"
            )
        self.store.update_config(
            sid,
            boot_ok=True,
            boot_s=boot_s,
            boot_error="",
            pp_max_micro_batch_size=topo.pp_max_micro_batch_size,
        )
        self._held(sid, started)
        booted = Booted(service, cluster, info, topo, before)
        self._up[sid] = booted
        return booted

    def _enter(self, service: Service) -> None:
        """Boot ``service``: its launch and its boot wait go to their phases."""
        sid = service.config.id
        wall, t0 = time.time(), time.perf_counter()
        healthy = False
        self._changed(service.cluster)
        try:
            service.__enter__()
            healthy = True
        finally:
            took = time.perf_counter() - t0
            # healthy: boot_s is the boot wait alone; failed: the whole attempt counts as boot
            waited = min(took, service.boot_s) if healthy and service.boot_s is not None else took
            self.phases.add(sid, "boot", waited)
            self.phases.add(sid, "launch", took - waited)
            self.phases.mark(sid, wall, wall + took)

    def _stop(self, service: Service) -> None:
        self._changed(service.cluster)
        with self.phases.timed(service.config.id, "teardown"):
            service.stop()

    def _write_phases(self, config_id: str) -> None:
        """The layout's phases so far into ``metadata/phases.json`` (measure.phases)."""
        self.store.update_json("metadata/phases.json", **{config_id: self.phases.row(config_id)})

    def _booting(self, config: Config, status: BootStatus) -> None:
        """Every poll of the boot wait: the status, and the workload made meanwhile (after the
        launch, whose process starts it would slow)."""
        self._prepare_workload(config)
        self._boot_status(status)

    def _boot_status(self, status: BootStatus) -> None:
        text, state = boot_status(status)
        self.live.status(status.config_id, text, state=state)

    def teardown(self, booted: Booted) -> None:
        """Record what the layout's logs and GPU memory show after its tests, then stop it."""
        started = time.monotonic()
        sid = booted.service.config.id
        if self._up.get(sid) is not booted:
            return  # torn down already (test_comm stops the service before it measures)
        del self._up[sid]
        ranks = len(booted.service.specs)
        try:
            try:
                self.live.status(sid, f"{sid} log scan | {ranks} rank logs", state="log scan")
                with self.phases.timed(sid, "log scan"):
                    self.record_logs(sid, booted.service.findings())
                if booted.cluster.nvidia_smi:
                    self.record_memory(sid, self.snapshot_gpus(booted.cluster, sid, "after"))
            except (HostError, ValueError, OSError) as exc:
                warnings.warn(
                    f"{sid}: no record after the tests: {exc}", GpuMemoryWarning, stacklevel=2
                )
            finally:
                self.live.status(sid, f"{sid} teardown | stopping {ranks} ranks", state="teardown")
                self._stop(booted.service)
            self.after_stop(booted.cluster, booted.service.config.id, booted.before)
        finally:
            self.live.end(sid)
        self._held(booted.service.config.id, started)
        self._write_phases(sid)

    def worked(self, config_id: str, seconds: float) -> None:
        """A test of ``config_id`` used its service for ``seconds``."""
        self._busy[config_id] = self._busy.get(config_id, 0.0) + seconds

    def _held(self, config_id: str, started: float) -> None:
        # The cluster time a layout needs: its boot, its tests and its teardown, without the
        # waits between them (an xdist worker may idle with a layout still up). A later run's
        # pool plan is made from it (pytest_ppsweep.balance). Real seconds, on the emulator
        # too: it is what the layout costs the cluster, unlike boot_s (emulated there).
        self.worked(config_id, time.monotonic() - started)
        self.store.update_config(config_id, held_s=round(self._busy[config_id], 3))

    def after_stop(self, cluster: Cluster, config_id: str, before: list[GpuMemory]) -> None:
        try:
            cleaned = self.snapshot_gpus(cluster, config_id, "cleaned")
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

    # -- measurement --------------------------------------------------------------------------

    def run_rounds(self, booted: Booted, concurrency: int) -> list[RoundResult]:
        """All repeats of one concurrency; every round is on disk before the next starts."""
        cfg = booted.service.config
        scale = booted.topology.time_scale
        results: list[RoundResult] = []
        repeats = self.sweep.workload_of(cfg).repeats
        spec, prompts = self.workload_for(cfg)
        for repeat in range(1, repeats + 1):
            if repeat == 3 and (why := self._skip_third(cfg.id, concurrency, results)):
                self.progress(f"{cfg.id} C={concurrency}: round 3/{repeats} skipped (adaptive "
                              f"repeats): {why}")
                break
            if (cfg.id, concurrency, repeat) in self.done:
                self.progress(f"{cfg.id} C={concurrency}: round {repeat}/{repeats} kept (resume)")
                continue
            booted.check_alive()
            self._changed(booted.cluster)
            t0 = time.monotonic()
            self.progress(f"{cfg.id} C={concurrency}: round {repeat}/{repeats} started")
            bar = _RoundBar(self.live, cfg.id, f"benchmark c{concurrency} r{repeat}/{repeats}",
                            spec.num_requests, scale)
            with self.store.open_raw(cfg.id, concurrency, repeat) as raw:

                def write(record: dict[str, Any], raw: Any = raw, bar: _RoundBar = bar) -> None:
                    raw.write(json.dumps(record) + "\n")
                    raw.flush()
                    bar.done(record)

                call_wall, call_t0 = time.time(), time.perf_counter()
                try:
                    result = bench.run_round_sync(
                        booted.service.base_url,
                        prompts,
                        concurrency,
                        spec=spec,
                        time_scale=scale,
                        on_record=write,
                        cancel=booted.service.died,
                        warmup=self._warm_up(booted),
                    )
                except bench.RoundCancelled:
                    self._round_phases(cfg.id, call_wall, call_t0, None)
                    self._aborted(booted, concurrency, repeat, t0)
                finally:
                    self.live.end(cfg.id)
            self._round_phases(cfg.id, call_wall, call_t0, result)
            rows_t0 = time.perf_counter()
            self.store.append_result(
                {
                    "run_id": self.store.run_id,
                    "config_id": cfg.id,
                    "pp": cfg.pp,
                    "tp": cfg.tp,
                    "ep": cfg.ep,
                    "concurrency": concurrency,
                    "repeat": repeat,
                    **result.as_row(),
                    "time_scale": scale,
                    "simulated": booted.topology.simulated,
                    "reused": False,
                }
            )
            self.progress(
                f"{cfg.id} C={concurrency}: round {repeat}/{repeats} "
                f"{result.completed}/{result.num_requests} done, "
                f"Input TPS {_fmt(result.input_tps)}, TTFT p50 {_fmt(result.ttft_p50_s)} s "
                f"({time.monotonic() - t0:.1f} s real)"
            )
            self.phases.add(cfg.id, "results", time.perf_counter() - rows_t0)
            results.append(result)
            if booted.look() is not None:  # the round ended by itself, but a rank died meanwhile
                self._aborted(booted, concurrency, repeat, t0)
        return results

    def _skip_third(self, config_id: str, concurrency: int,
                    results: list[RoundResult]) -> str | None:
        """--ppsweep-adaptive: why the third repeat of this point is not needed, or None."""
        gate = self.third_repeat
        tps = [r.input_tps for r in results if r.input_tps is not None]
        if gate is None or len(results) != 2 or len(tps) != 2:
            return None
        why: str | None = gate(config_id, concurrency, tps)
        return why

    # -- profile window (seeds §9.3) ------------------------------------------------------------

    def profile_round(self, booted: Booted) -> attribution.LayoutProfile:
        """One extra round wrapped by SGLang's /start_profile and /stop_profile, kept out of the
        medians (not in results.csv; its requests go to ``profile/<layout>/requests.jsonl``).
        Every rank's trace is collected from its node into ``profile/<layout>/``, parsed and
        attributed (``attribution.json``, ``profile.csv``). Raises ``collect.ProfileError``
        naming the node of a missing trace, ``trace.TraceError`` naming a file that cannot be
        parsed, ``LayoutDead`` when a rank dies meanwhile."""
        spec = self.sweep.profile or ProfileSpec()
        cfg, cluster = booted.service.config, booted.cluster
        started = time.monotonic()
        booted.check_alive()
        conc = spec.concurrency or max(self.sweep.workload.concurrency)
        local = summary.layout_dir(self.store.dir, cfg.id)
        local.mkdir(parents=True, exist_ok=True)
        folder = collect.remote_dir(cluster, spec.output_dir, self.store.run_id, cfg.id, local)
        profile_id = f"{time.time():.6f}"  # SGLang's own default is str(time.time())
        body = window.request_body(spec, folder, cfg.id, profile_id)
        self.store.write_json(f"profile/{cfg.id}/request.json", body)
        round_spec = replace(self.spec, warmup_requests=0,
                             num_requests=spec.num_requests or self.spec.num_requests)
        prompts = generate_prompts(round_spec)
        url, scale = booted.service.base_url, booted.topology.time_scale
        self.progress(f"{cfg.id}: profile window: {spec.num_steps} steps per rank, "
                      f"C={conc}, {round_spec.num_requests} requests, traces to {folder}")
        window.start(url, body, cfg.id)
        try:
            with (local / "requests.jsonl").open("w", encoding="utf-8") as raw:

                def write(record: dict[str, Any]) -> None:
                    raw.write(json.dumps(record) + "\n")

                result = bench.run_round_sync(
                    url, prompts, conc, spec=round_spec, time_scale=scale, on_record=write,
                    cancel=booted.service.died,
                )
        except BaseException as exc:
            # close the window if the server still answers; a rank's death is the cause to show
            with contextlib.suppress(collect.ProfileError):
                window.stop(url, cfg.id)
            if isinstance(exc, bench.RoundCancelled):
                booted.check_alive()
            raise
        def traces(timeout_s: float) -> list[Path]:
            return collect.collect_traces(
                cluster, cfg, folder, local, f"{cfg.id}-{profile_id}",
                host_for=lambda n: host_for(cluster, cluster.hosts[n], self.registry),
                timeout_s=timeout_s,
            )

        # The window ends by itself after num_steps forward steps, which a round has: its
        # traces come without /stop_profile. Stopping an ended window makes SGLang log a
        # RuntimeError traceback ("Profiling is not in progress"), which the log scan must
        # call fatal, so the stop is only the fallback of a window still open.
        stopped = False
        try:
            files = traces(min(spec.timeout_s, WINDOW_END_S))
        except collect.ProfileError:
            stopped = window.stop(url, cfg.id)
            files = traces(spec.timeout_s)
        lp = attribution.aggregate(cfg.id, [trace.parse(f) for f in files])
        summary.write_layout(self.store.dir, lp)
        summary.write_table(self.store.dir, self.sweep.baseline, [c.id for c in self.sweep.configs])
        ar = lp.calls.get("all_reduce", 0)
        self.progress(
            f"{cfg.id}: profile window {'stopped' if stopped else 'ended after num_steps'}, "
            f"{result.completed}/{result.num_requests} requests, {len(files)} traces: "
            f"all-reduce {ar:g} calls {lp.cumulative_ms.get('all_reduce', 0.0):,.1f} ms, "
            f"exposed comm {lp.exposed_share:.1%}, overlap {lp.overlap_ratio:.1%}"
        )
        self.worked(cfg.id, time.monotonic() - started)
        return lp

    def _warm_up(self, booted: Booted) -> bool:
        """Whether this round sends the warm-up requests: only the first round of a boot (the
        server stays warm for the later rounds; each still starts with /flush_cache)."""
        token = booted.service.boot_token
        if token in self._warmed:
            return False
        self._warmed.add(token)
        return True

    def _round_phases(
        self, config_id: str, wall: float, t0: float, result: RoundResult | None
    ) -> None:
        """A round's call (from ``t0``, ``time.perf_counter()``) split into its measured
        requests, its warm-up and the rest."""
        took = time.perf_counter() - t0
        measured = warm = 0.0
        if result is not None:
            measured = min(took, result.duration_raw_s)
            warm = min(took - measured, warmup_span(result.warmup_records))
        self.phases.add(config_id, "round", measured)
        self.phases.add(config_id, "warm-up", warm)
        self.phases.add(config_id, "flush", took - measured - warm)
        self.phases.mark(config_id, wall, wall + took)

    def _aborted(self, booted: Booted, concurrency: int, repeat: int, t0: float) -> NoReturn:
        """A rank died during round ``repeat``: say so and fail with the cause."""
        cid = booted.service.config.id
        reason = booted.dead
        repeats = self.sweep.workload_of(booted.service.config).repeats
        self.progress(
            f"{cid} C={concurrency}: round {repeat}/{repeats} aborted after "
            f"{time.monotonic() - t0:.1f} s real: {reason}"
        )
        raise LayoutDead(
            f"{cid}: layout dead: {reason}; round c{concurrency} r{repeat}/{repeats} aborted\n"
            f"{booted.service.evidence()}"
        ) from None

    def comm(self, config: Config) -> list[DomainRun]:
        """The all-reduce benchmark on each TP domain of ``config`` (seeds §9.2), with its
        service stopped: torn down first if it is up (after the layout's benchmark), never
        booted otherwise. Results are in comm.csv / comm_summary.csv as each domain ends;
        :class:`~pytest_ppsweep.comm.runner.CommFailed` names node and rank."""
        from pytest_ppsweep.comm.runner import run_comm  # only when the benchmark runs
        from pytest_ppsweep.matrix.commspec import size_label

        sid = config.id
        if sid in self._up:
            self.progress(f"{sid}: service stopped for the all-reduce benchmark")
            self.teardown(self._up[sid])
        cluster = self.cluster_for(config)
        started = time.monotonic()
        self.progress(f"{sid}: all-reduce benchmark on {cluster.name}")
        try:
            runs, notes = run_comm(
                self.sweep, cluster, config, self.store, self.registry,
                status=lambda text: self.live.status(sid, f"{sid} comm {text}", state="comm"),
            )
        finally:
            self.live.end(sid)
            self._held(sid, started)
        for note in notes:
            self.progress(f"{sid}: {note}")
        for run in runs:
            by = {int(r["size_bytes"]): r for r in run.rows}
            big = by.get(max(by)) if by else None
            if big is not None:
                self.progress(
                    f"{sid}: all-reduce {run.domain.name} ({run.domain.label}): "
                    f"{len(run.rows)} sizes, {size_label(int(big['size_bytes']))} in "
                    f"{float(big['time_us']) / 1000:.3f} ms, busbw {float(big['busbw_gbs']):.2f} "
                    f"GB/s ({time.monotonic() - started:.1f} s real)"
                )
        return runs

    def close(self) -> None:
        """Stop what is left and close the connections, when the run owns its registry."""
        if self._own_registry:
            self.registry.close()

    def record_logs(self, config_id: str, findings: list[Finding]) -> None:
        self.store.update_config(config_id, log_clean=not findings, log_findings=len(findings))

    def record_memory(self, config_id: str, gpus: list[GpuMemory]) -> None:
        worst = worst_rank(gpus)
        if worst is None:
            return
        self.store.update_config(
            config_id,
            mem_peak_mib=worst.used_mib,
            mem_total_mib=worst.total_mib,
            mem_headroom_mib=worst.headroom_mib,
            mem_worst_node=worst.node,
            mem_worst_gpu=worst.index,
        )


class _RoundBar:
    """A round's progress bar: requests done of the total and the running Input TPS (emulated
    time on the emulator, as results.csv). Called once per finished request; redrawn at most
    every ``BAR_EVERY_S``, and at the last request."""

    def __init__(self, live: LiveStatus, key: str, phase: str, total: int, scale: float) -> None:
        self.live, self.key, self.phase, self.total, self.scale = live, key, phase, total, scale
        self.count = self.tokens = 0
        self.t0 = self.drawn = time.monotonic()
        self._draw(self.t0)

    def done(self, record: dict[str, Any]) -> None:
        self.count += 1
        if record.get("ok"):
            self.tokens += int(record.get("prompt_tokens") or record.get("prompt_len") or 0)
        now = time.monotonic()
        if now - self.drawn >= BAR_EVERY_S or self.count >= self.total:
            self._draw(now)

    def _draw(self, now: float) -> None:
        self.drawn = now
        elapsed = now - self.t0
        tps = self.tokens / (elapsed * self.scale) if self.tokens and elapsed > 0 else None
        self.live.status(
            self.key,
            f"{self.key} {self.phase} {round_bar(self.count, self.total)} "
            f"{self.count}/{self.total} | Input TPS {'n/a' if tps is None else f'{tps:,.0f}'} "
            f"| {elapsed:.1f} s",
        )


# How long a profile window that ended by itself (num_steps) may take to write its traces
# before /stop_profile is sent (real SGLang on CPU: a few seconds).
WINDOW_END_S = 15.0


def workload_spec(w: Workload) -> WorkloadSpec:
    """What the load generator needs of a sweep's workload."""
    return WorkloadSpec(
        input_len=w.input_len,
        output_len=w.output_len,
        range_ratio=w.range_ratio,
        num_requests=w.num_requests,
        seed=w.seed,
        vocab_size=w.vocab_size,
        warmup_requests=w.warmup_requests,
        api=w.api,
        request_timeout_s=w.request_timeout_s,
        round_timeout_s=w.round_timeout_s,
        request_rate=w.request_rate,
        burstiness=w.burstiness,
    )


def _one_call(cluster: Cluster) -> bool:
    """Whether one nvidia-smi call answers for every node: a local cluster (its nodes are
    this machine) of several nodes whose ``nvidia_smi`` takes ``{hosts}``."""
    return (
        cluster.kind == "local"
        and len(cluster.hosts) > 1
        and any(HOSTS_PLACEHOLDER in a for a in cluster.nvidia_smi)
    )


def _scaled(seconds: float | None, time_scale: float) -> float | None:
    """Real seconds measured here → the run's time (emulated seconds on the emulator)."""
    return None if seconds is None else round(seconds * time_scale, 3)


def _launched_scale(service: Service) -> float:
    """The time scale when the server info was not read (a failed boot): what the emulator's
    banner in rank 0's log says (contract: its first line), 1.0 for a real server."""
    return simulated_time_scale(service.log_path(0)) or 1.0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{value:,.2f}"
