"""``--ppsweep-dry-run``: what a run would do, read from the sweep file alone.

For every point the run would boot: every node's exact launch command and environment, as
:mod:`~pytest_ppsweep.cluster.rankspec` builds them for the launchers (secrets redacted; a P/D
layout's by server group and role, each prefill server's bootstrap port, then its router's
command); then
the number of boots (one per server configuration: the points that differ only in their
workload share a boot) and an estimated cluster time:

* from a fitted planner profile (``planner/profile.json`` of the newest earlier run of this
  sweep in the reports folder, written by ``python -m pytest_ppsweep fit``; a sweep of single
  serve groups only, which is what it predicts): each layout's
  predicted boot, plus each round (requests × input tokens / predicted Input TPS) times the
  repeats and the warm-up;
* else from earlier runs of this sweep, whatever their run id (each layout's measured cluster
  time, ``held_s``);

(the profile and the runs only of the same cluster, emulated or real as it is: an emulator's
minutes say nothing of a real cluster's)
* else, for a model of the seeds' class (Kimi-K3), from the seeds' own figures: 338-538 s per
  boot and 3,258-8,824 tok/s of Input TPS for the rounds (an emulated cluster at its time
  scale), given as a range with the boot bound beside it;
* else from the sweep's own boot bound: every boot at most ``boot_timeout_s`` (the rounds
  cannot be estimated without a profile, a run or a reference; said so).

Plain Python: it opens no connection and writes nothing (the plugin prints these lines).
Its first line after the title says which server-flag check the dry run made.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.rankspec import RankSpec, bootstrap_port, rank_specs, router_spec
from pytest_ppsweep.folder.runfolder import PLANNER_PROFILE_JSON
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep, boot_groups
from pytest_ppsweep.measure.eta import duration
from pytest_ppsweep.measure.probesize import not_modelled, probe_size
from pytest_ppsweep.measure.slosearch import Search, load_text
from pytest_ppsweep.planner.data import PlannerError
from pytest_ppsweep.planner.fitting import load_fitted
from pytest_ppsweep.pool.balance import (
    Where,
    earlier_runs,
    expected_durations,
    outside_layouts_s,
)
from pytest_ppsweep.stats.accuracytest import plan

__all__ = [
    "SEEDS",
    "ClusterTime",
    "Reference",
    "accuracy_lines",
    "boots_line",
    "cluster_time",
    "dry_run_lines",
    "fitted_profile",
    "pd_lines",
    "slo_probe_lines",
]


@dataclass(frozen=True)
class Reference:
    """What a model class's own measurements say a boot and a round take (the source named)."""
    boot_s: tuple[float, float]
    input_tps: tuple[float, float]
    source: str

    def applies(self, model_path: str) -> bool:
        return "kimi-k3" in model_path.lower()


SEEDS = Reference(
    boot_s=(338.0, 538.0),
    input_tps=(3257.96, 8824.12),
    source="the seeds' Kimi-K3 cluster (4 × 8 RTX 6000D): 338-538 s per boot, Input TPS "
           "3,258-8,824 tok/s at 16K prompts (PP1…PP8)",
)
"""The seeds' figures: boots of 338-538 s measured on their cluster (the users' reports of
their runs), and the Input TPS medians of the seeds' §3 table (PP1 slowest, PP8 fastest)."""
EMULATOR_TIME_SCALE = 100.0
"""The emulator's default time scale (sim/launch/settings.py; the plugin does not import the
emulator): emulated seconds per real second unless the cluster's env sets another."""


@dataclass(frozen=True)
class ClusterTime:
    """An estimate of the cluster time of a run: seconds (an upper bound when ``bound``; the
    upper end of a range when ``low`` is set) and where it comes from; ``at_most``: the boot
    bound beside a range."""
    seconds: float
    source: str
    bound: bool = False
    low: float | None = None
    at_most: str = ""

    def describe(self) -> str:
        held = duration(self.seconds)
        if self.bound:
            return f"at most {held} of boots ({self.source})"
        if self.low is not None:
            bound = f"; {self.at_most}" if self.at_most else ""
            return f"about {_span(self.low)} to {_span(self.seconds)} ({self.source}){bound}"
        return f"about {held} ({self.source})"

    def times(self, boots: int) -> ClusterTime:
        """The estimate of one boot per layout, for ``boots`` boots of each ([sweep] boots:
        every boot runs its rounds again)."""
        if boots == 1:
            return self
        return replace(self, seconds=self.seconds * boots,
                       low=None if self.low is None else self.low * boots,
                       source=f"{self.source}; × {boots} boots of each layout")


def _span(seconds: float) -> str:
    """A range's end: seconds up to 3 min (``88 s``, not ``1 min``), else as :func:`duration`."""
    return f"{max(seconds, 0):.0f} s" if seconds < 180 else duration(seconds)


def fitted_profile(reports: Path, sweep_name: str, cluster: Cluster | None = None
                   ) -> Path | None:
    """The newest earlier run of ``sweep_name`` in ``reports`` that holds a fitted profile
    (whatever its run id; on ``cluster`` when given: :func:`_where`)."""
    found = earlier_runs(reports, sweep_name, holding=PLANNER_PROFILE_JSON,
                         where=_where(cluster))
    return found[0] / PLANNER_PROFILE_JSON if found else None


def _where(cluster: Cluster | None) -> Where | None:
    """The cluster whose earlier runs may estimate this one's times: the same cluster, running
    the emulator or not as it does (never an emulator's minutes for a real cluster)."""
    if cluster is None:
        return None
    return Where(cluster.name, cluster.server_module.startswith("pytest_ppsweep.sim"))


def _time_scale(cluster: Cluster | None) -> float:
    """Emulated seconds per real second of ``cluster`` (1 for a real engine)."""
    if cluster is None or not cluster.server_module.startswith("pytest_ppsweep.sim"):
        return 1.0
    try:
        return float(cluster.env.get("PPSWEEP_SIM_TIME_SCALE", "") or EMULATOR_TIME_SCALE)
    except ValueError:
        return EMULATOR_TIME_SCALE


def _from_reference(sweep: Sweep, configs: Sequence[Config], cluster: Cluster | None,
                    bound: ClusterTime) -> ClusterTime | None:
    """The range the model class's reference gives, or None when it has none."""
    if not SEEDS.applies(sweep.model_path):
        return None
    scale = _time_scale(cluster)
    boots = len(set(boot_groups(configs).values()))
    requests = 0.0
    for cfg in configs:
        w = sweep.workload_of(cfg)
        requests += len(w.concurrency) * (w.num_requests * w.repeats + w.warmup_requests) \
            * w.input_len
    low = (boots * SEEDS.boot_s[0] + requests / SEEDS.input_tps[1]) / scale
    high = (boots * SEEDS.boot_s[1] + requests / SEEDS.input_tps[0]) / scale
    at = f", at the emulator's time scale {scale:g}" if scale != 1.0 else ""
    return ClusterTime(high, f"{SEEDS.source}{at}", low=low,
                       at_most=f"at most {duration(bound.seconds)} of boots ({bound.source})")


def cluster_time(sweep: Sweep, configs: Sequence[Config], reports: Path,
                 cluster: Cluster | None = None) -> ClusterTime:
    """The estimated cluster time of booting and measuring ``configs`` on ``cluster`` (see the
    module), ``[sweep] boots`` times over."""
    return _one_boot_each(sweep, configs, reports, cluster).times(sweep.boots)


def _one_boot_each(sweep: Sweep, configs: Sequence[Config], reports: Path,
                   cluster: Cluster | None) -> ClusterTime:
    # a fitted profile predicts one serve group's layout: a sweep with P/D layouts is estimated
    # from its earlier runs or its boot bound
    single = all(c.deployed is None for c in configs)
    profile = fitted_profile(reports, sweep.name, cluster) if single else None
    if profile is not None:
        try:
            fitted = load_fitted(profile)
        except PlannerError:
            fitted = None
        if fitted is not None:
            total = 0.0
            booting = set(boot_groups(configs).values())  # one boot per server configuration
            for cfg in configs:
                w = sweep.workload_of(cfg)
                boot = 0.0
                for c in w.concurrency:
                    group = cfg.deployment.serve_group
                    pred = fitted.predict(group.pp, group.tp, c, w.input_len, w.num_requests)
                    boot = pred.boot_s.value
                    per_request = w.input_len / max(pred.input_tps.value, 1e-9)
                    total += per_request * (w.num_requests * w.repeats + w.warmup_requests)
                total += boot if cfg.id in booting else 0.0
            return ClusterTime(total, f"fitted profile {profile}")

    ids = [c.id for c in configs]
    earlier = expected_durations(reports, sweep.name, ids, where=_where(cluster))
    if earlier.measured:
        # what the newest of those runs spent outside its layouts (collection, preflight, the
        # close) is spent again
        extra = outside_layouts_s(reports / earlier.sources[0]) or 0.0
        plus = f", plus {extra:.0f} s outside the layouts as in {earlier.sources[0]}" \
            if extra >= 0.5 else ""
        return ClusterTime(sum(earlier.seconds.values()) + extra, earlier.describe() + plus)
    boots = len(set(boot_groups(configs).values()))
    bound = ClusterTime(boots * sweep.boot_timeout_s,
                        f"{boots} boot(s) × boot_timeout_s {sweep.boot_timeout_s:g} s; "
                        "no fitted profile, earlier run of this sweep or reference for its "
                        "model to estimate the rounds", bound=True)
    ref = _from_reference(sweep, configs, cluster, replace(
        bound, source=f"{boots} boot(s) × boot_timeout_s {sweep.boot_timeout_s:g} s"))
    return ref if ref is not None else bound


def dry_run_lines(sweep: Sweep, cluster: Cluster, configs: Sequence[Config],
                  reports: Path, concurrencies: Mapping[str, Collection[int]] | None = None,
                  flags_line: str = "") -> list[str]:
    """What ``--ppsweep-dry-run`` prints: first ``flags_line``, which server-flag check was
    made (cluster/preflight.dry_run_flags: the engine's parser here, or offline against a kept
    flag list, or why none), then per point (with the Cs it runs: ``concurrencies``, else its
    workload's) every node's launch command and environment (redacted), the container options
    of a docker kind, then the boots and the estimated cluster time."""
    lines = [f"ppsweep dry run of {sweep.path} on cluster {cluster.name!r} ({cluster.kind}, "
             f"launcher {cluster.launcher}, {len(cluster.hosts)} node(s)); no rank is started "
             "and nothing is written"]
    if flags_line:  # first: which check was made, never silently skipped
        lines.append(flags_line)
    backend = backend_of(cluster)
    lines += backend.dry_run_lines(sweep)
    for cfg in configs:
        cs = sorted((concurrencies or {}).get(cfg.id) or sweep.workload_of(cfg).concurrency)
        at = f"at C = {', '.join(map(str, cs))}"
        specs = rank_specs(sweep, cluster, cfg)
        if cfg.deployed is not None and cfg.deployed.disaggregated:
            lines.append(f"{cfg.id}: P/D layout, {cfg.label}, KV transfer "
                         f"{cfg.deployed.transfer_backend}, {at}")
            lines += backend.dry_run_point_lines(cfg.id, [s.host for s in specs])
            lines += pd_lines(sweep, cluster, cfg, specs)
            continue
        lines.append(f"{cfg.id}: PP/TP/EP {cfg.label} {at}")
        lines += backend.dry_run_point_lines(cfg.id, [s.host for s in specs])
        for spec in specs:
            lines.append(f"  node{spec.node_rank} {spec.host} ({spec.address}): "
                         f"{spec.command_line()}")
    lines += slo_probe_lines(sweep, configs)
    lines += accuracy_lines(sweep)
    lines.append(boots_line(configs, sweep.boots))
    lines.append("estimated cluster time: "
                 f"{cluster_time(sweep, configs, reports, cluster).describe()}")
    return lines


def pd_lines(sweep: Sweep, cluster: Cluster, config: Config, specs: Sequence[RankSpec]
             ) -> list[str]:
    """A P/D layout's commands: each server group by role (its shape, its cluster nodes, a
    prefill server's bootstrap port), every node's rank under it, then the router's command
    (its node and port) last, as it starts last."""
    lines: list[str] = []
    dep = config.deployment
    placement = cluster.placement(config)
    for group, nodes in zip(dep.groups, placement, strict=True):
        port = bootstrap_port(cluster, config, group)
        where = ", ".join(cluster.hosts[i].name for i in nodes)
        lines.append(f"  {group.label}: {group.role} server {group.shape} on node(s) {where}"
                     + (f", bootstrap port {port}" if port else "")
                     + f", serving http://{cluster.hosts[nodes[0]].address}:{cluster.port}")
        for spec in (s for s in specs if s.group == group.label):
            lines.append(f"    node{spec.node_rank} {spec.host} ({spec.address}): "
                         f"{spec.command_line()}")
    router = router_spec(sweep, cluster, config)
    if router is not None and dep.router is not None:
        url = dep.url([h.address for h in cluster.hosts], cluster.port, placement)
        lines.append(f"  router on {router.host} ({router.address}), port {dep.router.port}, "
                     f"the benchmark's URL {url}: {router.command_line()}")
    return lines


def accuracy_lines(sweep: Sweep) -> list[str]:
    """The ``[accuracy]`` check (test_accuracy, once per boot): its backend, task file and the
    questions each boot is asked (stats/accuracytest.plan)."""
    spec = sweep.accuracy
    if spec is None:
        return []
    the_plan = plan(spec.min_drop, spec.alpha, spec.beta, len(spec.pool), spec.questions)
    return [f"accuracy ({spec.backend}, {spec.tasks_path}, {spec.few_shot}-shot, "
            f"{spec.metric}) once per boot: {the_plan.line()}"]


def slo_probe_lines(sweep: Sweep, configs: Sequence[Config]) -> list[str]:
    """The SLO search's probes per workload with an SLO (test_slo, after a point's rounds): the
    probes the policy (measure/slosearch.py) takes whatever the results, the rule of the rest,
    and their request counts."""
    by_workload: dict[str, list[str]] = {}
    for cfg in configs:
        if sweep.workload_of(cfg).slo is not None:
            by_workload.setdefault(cfg.workload or "default", []).append(cfg.id)
    lines: list[str] = []
    for name, ids in by_workload.items():
        cfg = next(c for c in configs if c.id == ids[0])
        w = sweep.workload_of(cfg)
        slo = w.slo
        assert slo is not None
        integer = slo.search == "concurrency"
        unit = "req/s" if slo.search == "rate" else "C"

        def load(value: float, integer: bool = integer, unit: str = unit) -> str:
            return f"{load_text(value, integer)} {unit}"

        n = slo.probe_requests(w.num_requests)
        auto = ""
        if slo.auto_requests:  # sized at the search, from the layout's measured prefill time
            n = probe_size(slo, None, w.num_requests).requests
            why = not_modelled(slo)
            auto = (f" (requests = \"auto\": {why}, so the workload's num_requests)" if why
                    else " (requests = \"auto\": each layout's size is computed before its "
                    "search from its measured prefill time, measure/probesize.py; counted here "
                    + (f"at {n}, the workload's own)" if n <= w.num_requests else
                       f"at {n}: the workload's own {w.num_requests} raised to the floor that "
                       "lets an overload show, the first probe at the minimum load excepted)"))
        how = (f"{n} requests at that rate (open loop"
               + (f", at most {slo.max_concurrency} in flight)" if slo.max_concurrency else ")")
               if slo.search == "rate" else f"{n} requests at that concurrency")
        first_mid = Search(slo.low, slo.high, slo.precision, slo.max_probes, w.repeats,
                           integer=integer)
        first_mid.next()
        first_mid.record(slo.low, True)
        first_mid.next()
        first_mid.record(slo.high, False)
        mid = first_mid.next()
        rounds = slo.max_probes + w.repeats  # + the repeats and the high end's confirm round
        lines += [
            f"SLO search of workload {name!r} ({slo.text()}) on each of {len(ids)} point(s) "
            f"({', '.join(ids)}), after its rounds; each probe sends {how}{auto}:",
            f"  probe 1: {load(slo.low)} (the minimum; outside the SLO: the search ends, "
            "\"below min\")",
            f"  probe 2: {load(slo.high)} (the maximum; within the SLO: the search ends, "
            "\"at least max\")",
            f"  probes 3-{slo.max_probes}: bisection of the bracket"
            + (f" (first {load(mid[0])})" if mid is not None else "")
            + f" until it is {load(slo.precision)} narrow or {slo.max_probes} probes are spent",
            f"  then {w.repeats - 1} repeat(s) at the load found ({w.repeats} rounds in all) and "
            "1 at the bracket's high end (both ends confirmed)",
        ]
        refine = slo.max_refine if slo.percentile_limits else 0
        if refine:
            lines.append(
                f"  then up to {refine} refine probe(s) either side of the capacity estimated "
                f"from every probe (results/slocapacity.py) until its {slo.confidence:.0%} "
                f"interval is within ±{slo.precision_pct:g} %")
        lines.append(
            f"  requests per point: {n} to {(rounds + refine) * n} ({rounds + refine} rounds of "
            f"{n}: {slo.max_probes} probes + {w.repeats - 1} repeats + 1 confirm"
            + (f" + {refine} refine" if refine else "") + "), more when a "
            "repeat falls outside the SLO and the search goes on below it")
    return lines


def boots_line(configs: Sequence[Config], each: int = 1) -> str:
    """How many boots the run makes: one per server configuration (the points that differ
    only in their workload share one, ``matrix.model.boot_groups``), ``each`` times over
    ([sweep] boots)."""
    groups = boot_groups(configs)
    boots = len(set(groups.values()))
    times = (f" × {each} boots each = {boots * each}, every one's first boot before any "
             "second; the SLO search, accuracy and profile on the first only"
             if each > 1 else "")
    if boots == len(configs):
        return f"boots: {boots} (one per point{times})"
    return (f"boots: {boots} (one per server configuration; {len(configs)} points, those that "
            f"differ only in their workload share a boot{times})")
