"""The sweep as frozen objects: hosts, clusters, layouts (configs), the workload and the sweep.

Built only by :mod:`pytest_ppsweep.matrix.parse`, which validates the file first; everything
downstream reads these and never the TOML."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ppsweep.engine.engines import DEFAULT_ENGINE
from pytest_ppsweep.matrix.accuracyspec import AccuracySpec
from pytest_ppsweep.matrix.commspec import CommSpec
from pytest_ppsweep.matrix.correctnessspec import CorrectnessSpec
from pytest_ppsweep.matrix.deployment import PD_ROLES, Deployment, ServerGroup
from pytest_ppsweep.matrix.expectspec import Expectation, expectation_for
from pytest_ppsweep.matrix.kindsettings import KindSettings
from pytest_ppsweep.matrix.schema import (
    MatrixError,
    did_you_mean,
)
from pytest_ppsweep.matrix.slospec import SloSpec

__all__ = ["HEALTH_STALL_S", "Cluster", "Config", "Host", "MatrixError", "NoClusterFits",
           "ProfileSpec", "Sweep", "Workload", "boot_groups", "cluster_for", "server_key"]

HEALTH_STALL_S = 30.0  # default [sweep] health_stall_s: a rank ≥ 1 timing out this long is dead


@dataclass(frozen=True)
class Host:
    """One node of a cluster: the address its rank binds and is reached at."""

    address: str
    name: str


@dataclass(frozen=True)
class Cluster:
    """Where configurations run: the nodes, how to reach them and how a rank is started."""

    name: str
    kind: str  # "local" (subprocess on this machine), "ssh" or "slurm"
    launcher: str  # "process" or "docker"
    hosts: tuple[Host, ...]
    gpus_per_node: int
    server_module: str
    port: int
    dist_init_port: int
    nvidia_smi: tuple[str, ...]
    # the first prefill server's KV bootstrap port of a P/D layout; the next servers' count up
    # from it (Deployment.bootstrap_port)
    bootstrap_port: int = 8998
    env: Mapping[str, str] = field(default_factory=dict)
    python: str = ""  # empty: this interpreter (local clusters)
    ssh_user: str = "root"
    ssh_key: str = ""
    known_hosts: str = ""
    verify_host_keys: bool = True
    sudo_password_file: str = ""
    shm_size: str = "32g"  # docker launcher: /dev/shm of each container
    # extra bind mounts "host:container[:ro]" of each container (docker launcher, Pyxis)
    mounts: tuple[str, ...] = ()
    # what only its kind takes (matrix/kinds.py: the kind's settings type, e.g. SlurmSettings;
    # None for a kind with no keys of its own). Read back by the kind's code with
    # ``<Type>.of(cluster)``; nothing else of the model knows its fields.
    settings: KindSettings | None = None

    @property
    def gpus(self) -> int:
        return len(self.hosts) * self.gpus_per_node

    def fits(self, config: Config) -> bool:
        """Whether ``config`` runs on this cluster: its deployment's groups fill this cluster's
        nodes, each its own (``Deployment.fit``, the one place this rule is written; a single
        serve group: PP × TP is exactly the cluster's GPUs)."""
        return not self.misfits(config)

    def misfits(self, config: Config) -> list[str]:
        """What of ``config`` does not fit on this cluster's nodes (empty: it fits): its groups
        (Deployment.fit), and a P/D layout's ports: the router's and the prefill servers'
        bootstrap ports each a port no server of the cluster already binds."""
        problems = config.deployment.fit(len(self.hosts), self.gpus_per_node)[1]
        dep = config.deployed
        if dep is None or dep.router is None:
            return problems
        taken = {self.port: "the cluster's port", self.dist_init_port: "the cluster's "
                 "dist_init_port"}
        for g in dep.role_groups("prefill"):
            port = dep.bootstrap_port(g, self.bootstrap_port)
            if port in taken:
                problems.append(f"{g.label}: bootstrap port {port} (bootstrap_port "
                                f"{self.bootstrap_port} + {port - self.bootstrap_port}) is also "
                                f"{taken[port]}")
            taken.setdefault(port, f"{g.label}'s bootstrap port")
        if dep.router.port in taken:
            problems.append(f"router: port {dep.router.port} is also "
                            f"{taken[dep.router.port]}; expected a port of its own")
        return problems

    def placement(self, config: Config) -> tuple[tuple[int, ...], ...]:
        """Each of ``config``'s server groups' host indices on this cluster, in group order;
        ``deployment.DoesNotFit`` naming what does not fit. A single serve group runs on every
        host, as it always did, also where it does not fit (the dry run and the tests build
        its commands regardless; :meth:`fits` is what refuses it)."""
        if config.deployed is None:
            return (tuple(range(len(self.hosts))),)
        return config.deployment.placement(len(self.hosts), self.gpus_per_node)

    def group_parts(self, config: Config) -> list[tuple[str, Cluster]]:
        """Each server group's label and this cluster cut to the group's nodes, in group order:
        what is recorded per group (GPU snapshots) asks each part. A single serve group: this
        cluster, unlabelled (the names its files always had)."""
        if config.deployed is None:
            return [("", self)]
        return [(g.label, replace(self, hosts=tuple(self.hosts[i] for i in nodes)))
                for g, nodes in zip(config.deployed.groups, self.placement(config), strict=True)]

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
    # Axis points (matrix/axes.py): the id parts of the non-default axis values
    # (``a2a_deepep``), every axis value of this point (the report's columns), the workload
    # name when the sweep has several (also an id part), and the EP the layout asked for when
    # SGLang rewrites it (``ep`` is then what runs: EP = TP with an EP-spanning a2a backend).
    tags: tuple[str, ...] = ()
    axes: Mapping[str, Any] = field(default_factory=dict)
    workload: str = ""
    asked_ep: int = 0
    # The engine that serves the point (``[sweep] engine``, engine/engines.py); not part of the
    # id or the server configuration's key: a sweep has one engine.
    engine: str = DEFAULT_ENGINE
    # The server groups and router of a layout that is more than one serve group (a
    # disaggregated one); None: the one serve group of pp/tp/ep (:attr:`deployment`).
    deployed: Deployment | None = None

    @property
    def deployment(self) -> Deployment:
        """How the layout is deployed: its server groups and router. Every reader of the
        layout's shape outside matrix/ asks this (``config.deployment.serve_group.tp``,
        ``.columns()``, ``.url(…)``), never pp/tp/ep themselves."""
        return self.deployed or Deployment.single(self.pp, self.tp, self.ep, self.server,
                                                  engine=self.engine)

    @property
    def layout_id(self) -> str:
        """``pp{pp}-tp{tp}-ep{ep}``: the layout alone (with the EP that runs); a P/D layout's
        is its deployment's (``p1-pp4tp4ep4-d2-tp8ep4``, :attr:`Deployment.layout_id`)."""
        if self.deployed is not None and self.deployed.disaggregated:
            return self.deployed.layout_id
        return f"pp{self.pp}-tp{self.tp}-ep{self.ep}"

    @property
    def id(self) -> str:
        """The layout id, then the non-default axis values and the workload (when the sweep
        has several): ``pp8-tp4-ep4``, ``pp4-tp8-ep8-a2a_deepep``, ``pp4-tp8-ep4-decode``."""
        return "-".join((self.layout_id, *self.tags, *((self.workload,) if self.workload else ())))

    @property
    def gpus(self) -> int:
        """GPUs the layout needs: every server group's (PP × TP for today's single group)."""
        return self.deployment.gpus

    @property
    def label(self) -> str:
        """The layout as a line shows it: ``PP / TP / EP`` (``4 / 8 / 4 (asked EP 8)``); a
        P/D layout's servers by role (``1 prefill × pp4-tp4-ep4, 2 decode × pp1-tp8-ep4``)."""
        if self.deployed is not None and self.deployed.disaggregated:
            return ", ".join(f"{len(gs)} {role} × {gs[0].shape}" for role in PD_ROLES
                             if (gs := self.deployed.role_groups(role)))
        asked = self.asked_ep
        rewritten = f" (asked EP {asked})" if asked and asked != self.ep else ""
        return f"{self.pp} / {self.tp} / {self.ep}{rewritten}"

    def matches(self, selector: str) -> bool:
        """Exact selection: the full id, or the layout as ``ppN``, ``ppN-tpM`` or
        ``ppN-tpM-epK`` (every axis point and workload of it); a P/D layout as ``pd`` (every
        P/D layout), ``pX`` / ``dY`` (its number of prefill / decode servers), ``pXdY`` or its
        layout id; never a substring."""
        return selector in self.selectors()

    def selectors(self) -> tuple[str, ...]:
        """Every name that selects this point: its id, ``ppN``, ``ppN-tpM``, its layout id; a
        P/D point's: its id, ``pd``, ``pX``, ``dY``, ``pXdY``, its layout id."""
        if self.deployed is not None and self.deployed.disaggregated:
            ratio = self.deployed.ratio
            d = ratio.index("d")
            return (self.id, "pd", ratio[:d], ratio[d:], ratio, self.layout_id)
        parts = self.layout_id.split("-")
        return (self.id, parts[0], "-".join(parts[:2]), self.layout_id)


def server_key(config: Config) -> str:
    """The server configuration a point boots: everything of ``config`` that reaches the
    launched ranks (layout, EP asked, its own server arguments and environment, its axis
    values), its workload left out. Points with the same key run on one boot, one workload
    after the other (run/boots.py); the sweep's own ``[server]``, ``[env]`` and image are the
    same for every point. The one home of this rule: ``pp8-tp4-ep4-mbs1#<digest>``, readable
    before the ``#`` (the id without the workload), exact after it."""
    facts = {"pp": config.pp, "tp": config.tp, "ep": config.ep, "asked_ep": config.asked_ep,
             "server": dict(config.server), "env": dict(config.env),
             "axes": {k: v for k, v in config.axes.items() if k != "workload"},
             "tags": list(config.tags)}
    if config.deployed is not None:  # several groups (absent: the digests stay as they were)
        facts["groups"] = repr(config.deployed)
    text = json.dumps(facts, sort_keys=True, default=str)
    name = "-".join((config.layout_id, *config.tags))
    return f"{name}#{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def boot_groups(configs: Iterable[Config]) -> dict[str, str]:
    """Each point's id → the id of the first point (in ``configs``' order) of its server
    configuration (:func:`server_key`): the unit that is booted once (xdist's work unit, the
    collection's order, the dry run's count of boots)."""
    first: dict[str, str] = {}
    return {c.id: first.setdefault(server_key(c), c.id) for c in configs}


def select(configs: Iterable[Config], selector: str) -> list[Config]:
    """What ``--ppsweep-config SELECTOR`` runs: the point whose id it is, exactly, when there is
    one (``pp8-tp4-ep4`` is PP8's default point, not its a2a variants); else every point of the
    layout it names (:meth:`Config.matches`)."""
    configs = list(configs)
    return [c for c in configs if c.id == selector] or [c for c in configs if c.matches(selector)]


def unknown_selector(configs: Iterable[Config], selector: str) -> str:
    """The did-you-mean of a selector that names no point: the closest of every point's names
    (:meth:`Config.selectors`), "" when none is close."""
    names = [name for c in configs for name in c.selectors()]
    return did_you_mean(selector, list(dict.fromkeys(names)))


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
    # Open loop (bench_serving's --request-rate): requests per second, inf = all at once; the
    # concurrency is then the cap on requests in flight (measure/arrivals.py).
    request_rate: float = math.inf
    burstiness: float = 1.0  # gamma-distributed gaps; 1.0 = Poisson
    slo: SloSpec | None = None  # the latency target and its load search (matrix/slospec.py)
    # What the answers rank this workload's points by (primary metric, then tie-break); empty:
    # derived from its shape (results/questions.py: prefill-like or decode-like).
    objective: tuple[str, ...] = ()
    # ``type`` (schema.WORKLOAD_TYPES): "random-ids", "trace" (a Mooncake trace replayed:
    # ``trace`` as written, ``trace_file`` resolved from the sweep file's folder, its sha256;
    # input_len/output_len are then the trace's mean lengths, num_requests its requests) or
    # "shared_prefix" (``prefix_share`` of the requests start with one ``prefix_len``-token
    # prefix). ``time_scale``: a trace's own timestamps stretched by it (2.0: half the rate).
    # ``hit_tolerance``: how far a round's achieved prefix hit rate may be from the implied one.
    type: str = "random-ids"
    trace: str = ""
    trace_file: str = ""
    trace_sha256: str = ""
    time_scale: float = 1.0
    prefix_len: int = 0
    prefix_share: float = 0.0
    hit_tolerance: float = 0.05

    @property
    def shared(self) -> bool:
        """Whether the workload's prompts share prefixes on purpose (a trace, a shared-prefix
        workload): its rounds check the server's achieved prefix hit rate."""
        return self.type != "random-ids"

    def as_json(self) -> dict[str, Any]:
        """The fields as JSON builtins (run.json, manifests); the open-loop, SLO and workload
        type fields only when set, so a closed-loop random-ids workload reads as earlier runs
        wrote it (layouts reusable). A trace is named by its path as written and its sha256,
        never by where this checkout keeps it."""
        fields = asdict(self)
        fields.pop("trace_file", None)
        for key, default in (("request_rate", math.inf), ("burstiness", 1.0), ("slo", None),
                             ("objective", ()), ("type", "random-ids"), ("trace", ""),
                             ("trace_sha256", ""), ("time_scale", 1.0), ("prefix_len", 0),
                             ("prefix_share", 0.0)):
            if fields.get(key) == default:
                fields.pop(key, None)
        if not self.shared:
            fields.pop("hit_tolerance", None)
        fields["concurrency"] = list(self.concurrency)
        if self.slo is not None:
            fields["slo"] = {**fields["slo"], "limits": [asdict(x) for x in self.slo.limits]}
        return fields


@dataclass(frozen=True)
class ProfileSpec:
    """The profile window (``[profile]`` or ``--ppsweep-profile``): one extra round at
    ``concurrency`` of ``num_requests`` requests, kept out of the medians, wrapped by SGLang's
    /start_profile (a ProfileReq of ``output_dir``, ``activities``, ``profile_prefix``,
    ``num_steps``) and /stop_profile, on ``layouts`` (config ids; empty: every layout)."""

    layouts: tuple[str, ...] = ()
    concurrency: int = 0  # 0: the largest C of [workload]
    num_requests: int = 0  # 0: [workload] num_requests
    num_steps: int = 3  # forward steps per rank (the seeds' window: 557 AR / ~200 per step)
    activities: tuple[str, ...] = ("CPU", "GPU")
    output_dir: str = "/tmp/ppsweep-profile"  # on each node (ssh clusters); bind-mounted (docker)
    timeout_s: float = 120.0  # how long every node's traces may take to appear

    def covers(self, config_id: str) -> bool:
        return not self.layouts or config_id in self.layouts


def file_of(origins: Iterable[tuple[str, str]], key: str, default: Path) -> Path:
    """The file of the longest dotted prefix of ``key`` in ``origins``, else ``default``: the
    one home of "which file holds this key" (parse errors, preflight's flag check)."""
    table = dict(origins)
    parts = key.replace("[", ".[").split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n]).replace(".[", "[")
        if prefix in table:
            return Path(table[prefix])
    return default


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
    # Named workloads (``[workloads.<name>]``, matrix/axes.py); empty: ``workload`` only.
    workloads: Mapping[str, Workload] = field(default_factory=dict)
    # ``[compare] baseline``: the axis values that make a point its comparison group's
    # baseline (results/confound.py); the axes named are those under study.
    compare_baseline: Mapping[str, Any] = field(default_factory=dict)
    # ``[compare] alpha`` / ``min_effect_pct``: the decision rule's significance level
    # (family-wise over a question) and equivalence margin in % (stats/decision.py).
    compare_alpha: float = 0.05
    compare_min_effect_pct: float = 1.0
    # ``[compare] boot_noise_pct`` (None: not stated) / ``one_boot_bound_pct``: the stated σ of
    # one boot's offset, and the gap a one-boot decision must clear (stats/decision.py).
    compare_boot_noise_pct: float | None = None
    compare_one_boot_bound_pct: float = 5.0
    # ``[compare] sequential``: a booted point gets more rounds while a comparison it takes
    # part in is undecided, up to max_repeats, with α spent over the looks (stats/decision.py).
    compare_sequential: bool = False
    # ``[sweep] engine``: the serving engine of every point (engine/engines.py)
    engine: str = DEFAULT_ENGINE
    axis_names: tuple[str, ...] = ()
    # "fail": a spread above spread_threshold makes the point INVALID (fails test_valid);
    # "warn": it is a warning only (exploratory runs).
    spread_rule: str = "fail"
    # Adaptive repeats: a point over the spread limit after its planned rounds gets more rounds
    # on the booted layout, up to this many in all (stats/spread.py; 0: the default, 8).
    max_repeats: int = 0
    # ``[sweep] boots`` (--ppsweep-boots): how many times each layout is booted in one run, its
    # rounds ([workload] repeats) measured on every boot; the boots of all layouts go round
    # by round (every layout's first boot, then every layout's second, …), so a drift of the
    # cluster over the run is not taken for a layout's effect. The boot-to-boot spread is then
    # the decisions' second level (stats/decision.levels, Kalibera and Jones).
    boots: int = 1
    # Real seconds a rank ≥ 1 may leave /health unanswered (a timeout, not a refusal) before the
    # liveness watch calls the layout dead (service/liveness.py; a SIGSTOPped or hung rank).
    health_stall_s: float = HEALTH_STALL_S
    # The profile window; None: no profile round (no [profile] table, no --ppsweep-profile).
    profile: ProfileSpec | None = None
    # The [comm] table (matrix.commspec): the all-reduce microbenchmark; None: not asked.
    comm: CommSpec | None = None
    # The [correctness] table (matrix.correctnessspec): the outputs probe of every layout.
    correctness: CorrectnessSpec = field(default_factory=CorrectnessSpec)
    # The [accuracy] table (matrix.accuracyspec): the task score of every layout; None: not asked.
    accuracy: AccuracySpec | None = None
    # [[expect]] (matrix.expectspec): the failures expected, reported as pytest's xfail.
    expect: tuple[Expectation, ...] = ()
    # Keys taken from a shared file (``extends``): (dotted key, file), the sweep file's own
    # keys not listed. :meth:`file_of` names the file an error is about.
    origins: tuple[tuple[str, str], ...] = ()
    # ``[sweep] gpu_hour_usd``: a GPU-hour's price; every point and answer then shows the cost
    # per million input and output tokens (results/cost.py). None: not given.
    gpu_hour_usd: float | None = None

    @property
    def slo_workloads(self) -> dict[str, Workload]:
        """The workloads that carry an SLO, by name (``default`` for ``[workload]``)."""
        named = self.workloads or {"default": self.workload}
        return {name: w for name, w in named.items() if w.slo is not None}

    @property
    def shared_files(self) -> tuple[Path, ...]:
        """The shared files (``extends``) that gave this sweep keys, in the order read."""
        own = str(self.path)
        return tuple(dict.fromkeys(Path(f) for _, f in self.origins if f != own))

    def file_of(self, key: str) -> Path:
        """The file that holds the dotted ``key`` (``server.chunked_prefill_size``,
        ``clusters.gpu.hosts[2]``): a shared file it came from, else the sweep file."""
        return file_of(self.origins, key, self.path)

    def cluster(self, name: str | None, source: str = "") -> Cluster:
        """The cluster ``name`` (default: ``[sweep] cluster``). ``source`` says where the name
        came from when not from the sweep file (``--ppsweep-cluster``): the error names it."""
        chosen = name or self.default_cluster
        if chosen not in self.clusters:
            hint = did_you_mean(chosen, list(self.clusters))
            where = (f"{source}: unknown cluster {chosen!r}{hint}; expected one of the "
                     f"clusters of {self.path}: " if source else
                     f"{self.path}: key 'sweep.cluster': unknown cluster {chosen!r}{hint}; "
                     "expected one of ")
            raise MatrixError(where + ", ".join(sorted(self.clusters)))
        return self.clusters[chosen]

    def pool(self, names: str | None) -> tuple[Cluster, ...]:
        """The clusters of a comma-separated list (``--ppsweep-cluster``; default: ``[sweep]
        cluster``)."""
        source = "--ppsweep-cluster" if names else ""
        chosen = [n.strip() for n in (names or self.default_cluster).split(",") if n.strip()]
        if len(set(chosen)) != len(chosen):
            raise MatrixError(f"{source or self.path}: cluster pool {chosen} names a cluster twice")
        return tuple(self.cluster(n, source) for n in chosen)

    def config(self, config_id: str) -> Config:
        return next(c for c in self.configs if c.id == config_id)

    def workload_of(self, config: Config) -> Workload:
        """The workload ``config`` runs (its named one, else the sweep's)."""
        return self.workloads.get(config.workload, self.workload)

    def expectation(self, config: Config) -> Expectation | None:
        """The ``[[expect]]`` that covers ``config`` (matrix.expectspec), or None."""
        return expectation_for(self.expect, config.layout_id, config.axes)

    def server_args(self, config: Config) -> dict[str, Any]:
        """The server arguments ``config`` boots with: ``[server]``, then the layout's own."""
        return {**self.server, **config.server}

    def group_args(self, config: Config, group: ServerGroup) -> dict[str, Any]:
        """The server arguments one server ``group`` of ``config`` boots with: ``[server]``,
        the layout's own, then the group's (a P/D role's ``server`` table); the one home of
        this order. The flags the engine derives from the group's role are not among them
        (cluster/rankspec.py adds them)."""
        return {**self.server_args(config), **group.flags}


class NoClusterFits(ValueError):
    """No cluster of the pool fits a layout; the message names the layout and the clusters."""


def cluster_for(pool: Sequence[Cluster], config: Config) -> Cluster:
    """The first cluster of ``pool`` that :meth:`Cluster.fits` ``config``; :class:`NoClusterFits`
    when none does (never a silent fallback to a cluster of another size)."""
    for cluster in pool:
        if cluster.fits(config):
            return cluster
    names = ", ".join(f"{c.name} ({c.gpus} GPUs)" for c in pool)
    why = ("" if config.deployed is None else
           " (" + "; ".join(f"{c.name}: {'; '.join(c.misfits(config))}" for c in pool) + ")")
    raise NoClusterFits(f"{config.id}: needs {config.gpus} GPUs; no cluster fits: {names}{why}")
