"""The sweep as frozen objects: hosts, clusters, layouts (configs), the workload and the sweep.

Built only by :mod:`pytest_ppsweep.matrix.parse`, which validates the file first; everything
downstream reads these and never the TOML."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_ppsweep.matrix.accuracyspec import AccuracySpec
from pytest_ppsweep.matrix.commspec import CommSpec
from pytest_ppsweep.matrix.correctnessspec import CorrectnessSpec
from pytest_ppsweep.matrix.expectspec import Expectation, expectation_for
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
    env: Mapping[str, str] = field(default_factory=dict)
    python: str = ""  # empty: this interpreter (local clusters)
    ssh_user: str = "root"
    ssh_key: str = ""
    known_hosts: str = ""
    verify_host_keys: bool = True
    sudo_password_file: str = ""
    shm_size: str = "32g"  # docker launcher: /dev/shm of each container
    mounts: tuple[str, ...] = ()  # docker launcher: extra bind mounts "host:container[:ro]"
    # slurm clusters (cluster/slurm.py): the hosts are placeholders until the allocation is
    # taken (``jobid``) or made (salloc with these settings), then its nodes
    slurm_jobid: str = ""
    slurm_partition: str = ""
    slurm_account: str = ""
    slurm_time: str = ""
    slurm_request_gpus: bool = True  # salloc --gpus-per-node <gpus_per_node>
    salloc_options: tuple[str, ...] = ()
    srun_options: tuple[str, ...] = ()
    # the login node the Slurm commands run on, over SSH with the ssh_* keys ("": this host)
    slurm_login: str = ""
    container_image: str = ""  # Pyxis: srun --container-image (mounts: --container-mounts)
    # what the allocation and each step ask for (cluster/slurm.py: salloc_argv, step_resources)
    slurm_exclusive: bool = True  # salloc --exclusive
    slurm_cpus_per_task: int = 0  # 0: every CPU the allocation has on the node
    slurm_mem: str = "0"  # salloc/srun --mem ("0": all of the node's memory)
    slurm_gres: str = ""  # salloc/srun --gres instead of --gpus-per-node
    # before each layout: the allocation's time left vs the layout's ETA + margin, and after a
    # node failure: "renew" (a new allocation without the failed nodes) or "stop" (resumable)
    slurm_on_limit: str = "renew"
    slurm_time_margin_s: int = 120
    # Pyxis: where each node keeps the image imported once as a squashfs (enroot import)
    container_cache: str = "/tmp/ppsweep-containers"
    # learnt from the allocation (cluster/slurm.resolve): the CPUs it holds on each node (the
    # fewest of any node), what a step's task asks for when cpus_per_task is 0
    slurm_node_cpus: int = 0

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
    # Axis points (matrix/axes.py): the id parts of the non-default axis values
    # (``a2a_deepep``), every axis value of this point (the report's columns), the workload
    # name when the sweep has several (also an id part), and the EP the layout asked for when
    # SGLang rewrites it (``ep`` is then what runs: EP = TP with an EP-spanning a2a backend).
    tags: tuple[str, ...] = ()
    axes: Mapping[str, Any] = field(default_factory=dict)
    workload: str = ""
    asked_ep: int = 0

    @property
    def layout_id(self) -> str:
        """``pp{pp}-tp{tp}-ep{ep}``: the layout alone (with the EP that runs)."""
        return f"pp{self.pp}-tp{self.tp}-ep{self.ep}"

    @property
    def id(self) -> str:
        """The layout id, then the non-default axis values and the workload (when the sweep
        has several): ``pp8-tp4-ep4``, ``pp4-tp8-ep8-a2a_deepep``, ``pp4-tp8-ep4-decode``."""
        return "-".join((self.layout_id, *self.tags, *((self.workload,) if self.workload else ())))

    @property
    def gpus(self) -> int:
        """GPUs the layout needs: PP × TP (what :meth:`Cluster.fits` compares)."""
        return self.pp * self.tp

    @property
    def label(self) -> str:
        asked = self.asked_ep
        rewritten = f" (asked EP {asked})" if asked and asked != self.ep else ""
        return f"{self.pp} / {self.tp} / {self.ep}{rewritten}"

    def matches(self, selector: str) -> bool:
        """Exact selection: the full id, or the layout as ``ppN``, ``ppN-tpM`` or
        ``ppN-tpM-epK`` (every axis point and workload of it); never a substring."""
        return selector in self.selectors()

    def selectors(self) -> tuple[str, ...]:
        """Every name that selects this point: its id, ``ppN``, ``ppN-tpM``, its layout id."""
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

    def as_json(self) -> dict[str, Any]:
        """The fields as JSON builtins (run.json, manifests); the open-loop and SLO fields only
        when set, so a closed-loop workload reads as earlier runs wrote it (layouts reusable)."""
        fields = asdict(self)
        for key, default in (("request_rate", math.inf), ("burstiness", 1.0), ("slo", None),
                             ("objective", ())):
            if fields.get(key) == default:
                fields.pop(key, None)
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
    # (family-wise over a question) and equivalence margin in % (results/stats.py).
    compare_alpha: float = 0.05
    compare_min_effect_pct: float = 1.0
    # ``[compare] sequential``: a booted point gets more rounds while a comparison it takes
    # part in is undecided, up to max_repeats, with α spent over the looks (results/stats.py).
    compare_sequential: bool = False
    axis_names: tuple[str, ...] = ()
    # "fail": a spread above spread_threshold makes the point INVALID (fails test_valid);
    # "warn": it is a warning only (exploratory runs).
    spread_rule: str = "fail"
    # Adaptive repeats: a point over the spread limit after its planned rounds gets more rounds
    # on the booted layout, up to this many in all (results/spread.py; 0: the default, 8).
    max_repeats: int = 0
    # ``[sweep] boots`` (--ppsweep-boots): how many times each layout is booted in one run, its
    # rounds ([workload] repeats) measured on every boot; the boots of all layouts go round
    # by round (every layout's first boot, then every layout's second, …), so a drift of the
    # cluster over the run is not taken for a layout's effect. The boot-to-boot spread is then
    # the decisions' second level (results/stats.levels, Kalibera and Jones).
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
