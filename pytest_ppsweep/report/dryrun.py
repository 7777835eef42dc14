"""``--ppsweep-dry-run``: what a run would do, read from the sweep file alone.

For every point the run would boot: every node's exact launch command and environment, as
:mod:`~pytest_ppsweep.cluster.rankspec` builds them for the launchers (secrets redacted); then
the number of boots (one per server configuration: the points that differ only in their
workload share a boot) and an estimated cluster time:

* from a fitted planner profile (``planner/profile.json`` of the newest earlier run of this
  sweep in the reports folder, written by ``python -m pytest_ppsweep fit``): each layout's
  predicted boot, plus each round (requests × input tokens / predicted Input TPS) times the
  repeats and the warm-up;
* else from earlier runs of this sweep (each layout's measured cluster time, ``held_s``);
* else from the sweep's own boot bound: every boot at most ``boot_timeout_s`` (the rounds
  cannot be estimated without a profile or a run; said so).

Plain Python: it opens no connection and writes nothing (the plugin prints these lines).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_ppsweep.cluster.rankspec import rank_specs
from pytest_ppsweep.folder.runfolder import PLANNER_PROFILE_JSON
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep, boot_groups
from pytest_ppsweep.measure.eta import duration

__all__ = ["ClusterTime", "boots_line", "cluster_time", "dry_run_lines", "fitted_profile"]


@dataclass(frozen=True)
class ClusterTime:
    """An estimate of the cluster time of a run: seconds (an upper bound when ``bound``) and
    where it comes from."""

    seconds: float
    source: str
    bound: bool = False

    def describe(self) -> str:
        held = duration(self.seconds)
        return (f"at most {held} of boots ({self.source})" if self.bound
                else f"about {held} ({self.source})")


def fitted_profile(reports: Path, sweep_name: str) -> Path | None:
    """The newest earlier run of ``sweep_name`` in ``reports`` that holds a fitted profile."""
    if not reports.is_dir():
        return None
    found = sorted((p for p in reports.glob(f"{sweep_name}-*/{PLANNER_PROFILE_JSON}")),
                   key=lambda p: p.parent.parent.name, reverse=True)
    return found[0] if found else None


def cluster_time(sweep: Sweep, configs: Sequence[Config], reports: Path) -> ClusterTime:
    """The estimated cluster time of booting and measuring ``configs`` (see the module)."""
    from pytest_ppsweep.planner.data import PlannerError

    profile = fitted_profile(reports, sweep.name)
    if profile is not None:
        from pytest_ppsweep.planner.fitting import load_fitted

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
                    pred = fitted.predict(cfg.pp, cfg.tp, c, w.input_len, w.num_requests)
                    boot = pred.boot_s.value
                    per_request = w.input_len / max(pred.input_tps.value, 1e-9)
                    total += per_request * (w.num_requests * w.repeats + w.warmup_requests)
                total += boot if cfg.id in booting else 0.0
            return ClusterTime(total, f"fitted profile {profile}")
    from pytest_ppsweep.pool.balance import expected_durations

    ids = [c.id for c in configs]
    earlier = expected_durations(reports, sweep.name, ids)
    if earlier.measured:
        return ClusterTime(sum(earlier.seconds.values()), earlier.describe())
    boots = len(set(boot_groups(configs).values()))
    return ClusterTime(boots * sweep.boot_timeout_s,
                       f"{boots} boot(s) × boot_timeout_s {sweep.boot_timeout_s:g} s; "
                       "no fitted profile or earlier run of this sweep to estimate the rounds",
                       bound=True)


def dry_run_lines(sweep: Sweep, cluster: Cluster, configs: Sequence[Config],
                  reports: Path, concurrencies: Mapping[str, Collection[int]] | None = None
                  ) -> list[str]:
    """What ``--ppsweep-dry-run`` prints: per point (with the Cs it runs: ``concurrencies``,
    else its workload's) every node's launch command and environment (redacted), then the
    boots and the estimated cluster time."""
    lines = [f"ppsweep dry run of {sweep.path} on cluster {cluster.name!r} ({cluster.kind}, "
             f"launcher {cluster.launcher}, {len(cluster.hosts)} node(s)); nothing is started, "
             "connected or written"]
    if cluster.launcher == "docker":
        lines.append(f"each command runs in a container of image {sweep.image} on its node")
    for cfg in configs:
        cs = sorted((concurrencies or {}).get(cfg.id) or sweep.workload_of(cfg).concurrency)
        lines.append(f"{cfg.id}: PP/TP/EP {cfg.label} at C = {', '.join(map(str, cs))}")
        for spec in rank_specs(sweep, cluster, cfg):
            lines.append(f"  node{spec.node_rank} {spec.host} ({spec.address}): "
                         f"{spec.command_line()}")
    lines.append(boots_line(configs))
    lines.append(f"estimated cluster time: {cluster_time(sweep, configs, reports).describe()}")
    return lines


def boots_line(configs: Sequence[Config]) -> str:
    """How many boots the run makes: one per server configuration (the points that differ
    only in their workload share one, ``matrix.model.boot_groups``)."""
    groups = boot_groups(configs)
    boots = len(set(groups.values()))
    if boots == len(configs):
        return f"boots: {boots} (one per point)"
    return (f"boots: {boots} (one per server configuration; {len(configs)} points, those that "
            "differ only in their workload share a boot)")
