"""Command-line options and ini keys of the plugin, read into values: the sweep with its
overrides, the selected layouts, the gate's reference and thresholds (set-up is session/setup.py).

Help-text rules (pytest-xdist's habit): each help says what the option does, its unit and its
default; every option has an ini key of the same name (without ``--``) read when the option is
not given.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_ppsweep.matrix.commspec import CommSpec
from pytest_ppsweep.matrix.model import MatrixError, ProfileSpec, Sweep, select, unknown_selector
from pytest_ppsweep.matrix.parse import load
from pytest_ppsweep.matrix.schema import SPREAD_RULES
from pytest_ppsweep.profile.collect import with_profile_mounts

OPTIONS: tuple[tuple[str, str, str | None], ...] = (
    (
        "ppsweep_matrix",
        "sweep file (TOML). Default: ppsweep.toml in the folder given to pytest, "
        "e.g. `pytest test_matrix`.",
        None,
    ),
    ("ppsweep_cluster", "cluster of the sweep file to run on. Default: [sweep] cluster.", None),
    ("ppsweep_image", "server image to use instead of [sweep] image (gate a new image).", None),
    ("ppsweep_reports", "folder that receives reports/<run_id>/. Default: reports.", "reports"),
    ("ppsweep_run_id", "name of the run folder. Default: <sweep name>-YYYYmmdd-HHMMSS.", None),
    (
        "ppsweep_boot_timeout",
        "seconds a layout may take to become healthy. Default: [sweep] boot_timeout_s.",
        None,
    ),
    ("ppsweep_repeats", "repeats per concurrency instead of [workload] repeats.", None),
    ("ppsweep_requests", "requests per round instead of [workload] num_requests.", None),
    (
        "ppsweep_boots",
        "boots of each layout in this run, every layout's first boot before any second one; "
        "each boot runs the rounds of every C (--ppsweep-repeats per boot), and the spread "
        "between boots becomes the decisions' second level. Default: [sweep] boots (1).",
        None,
    ),
    (
        "ppsweep_spread_rule",
        "fail or warn: whether a spread above spread_threshold fails test_valid (exploratory "
        "and cut-down runs: warn). Default: [sweep] spread_rule (fail).",
        None,
    ),
    (
        "ppsweep_compare",
        "gate: compare with this run folder, run id or baseline name; a regression fails "
        "test_no_regression[<layout>-c<C>].",
        None,
    ),
    (
        "ppsweep_save_baseline",
        "save this run as the named baseline (reports/baselines/NAME) when every test passed.",
        None,
    ),
    (
        "ppsweep_reuse",
        "take over identical layouts (same manifest, all rounds N/N) from this earlier run "
        "folder instead of booting them.",
        None,
    ),
    (
        "ppsweep_baseline_from",
        "when the baseline layout is not selected (-k, --ppsweep-config): take its numbers from "
        "this earlier run folder, run id or baseline name; its baseline manifest must match "
        "this run's field by field (else a usage error listing the differences). Default: the "
        "newest matching run in the reports folder.",
        None,
    ),
    (
        "ppsweep_resume",
        "continue this interrupted run folder: keep its finished rounds, run the rest.",
        None,
    ),
    (
        "ppsweep_time_scale",
        "emulator only: emulated seconds per real second "
        "(PPSWEEP_SIM_TIME_SCALE). Default: the emulator's (100).",
        None,
    ),
)


DRY_RUN_HELP = (
    "validate everything, then print for each selected point every node's exact launch command "
    "and environment (secrets redacted), the number of boots and the estimated cluster time; "
    "opens no connection, writes no run folder, exits 0."
)


def addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ppsweep", "parallel-layout sweep (pytest-ppsweep)")
    for name, help_text, default in OPTIONS:
        flag = "--" + name.replace("_", "-")
        group.addoption(flag, dest=name, default=None, help=help_text)
        parser.addini(name, help_text, default=default)
    group.addoption(
        "--ppsweep-threshold",
        dest="ppsweep_threshold",
        action="append",
        default=[],
        metavar="METRIC:±N%",
        help="gate threshold, e.g. input_tps:-3%% or ttft_p50:+5%% (repeatable; default "
        "input_tps:-3%%, ttft_p50:+5%%, or [sweep] thresholds).",
    )
    group.addoption(
        "--ppsweep-config",
        dest="ppsweep_config",
        action="append",
        default=[],
        metavar="ID",
        help="run only these layouts, matched exactly: a full id (pp8-tp4-ep4), ppN or ppN-tpM; "
        "repeatable or comma-separated. Unlike `-k pp1`, `--ppsweep-config pp1` never selects "
        "pp16.",
    )
    group.addoption(
        "--ppsweep-concurrency",
        dest="ppsweep_concurrency",
        action="append",
        default=[],
        metavar="C",
        help="run only these concurrencies (repeatable or comma-separated), e.g. the points a "
        "gate found regressed; each must be one of the sweep's workloads' concurrency.",
    )
    group.addoption(
        "--ppsweep-dry-run",
        dest="ppsweep_dry_run",
        action="store_true",
        default=False,
        help=DRY_RUN_HELP,
    )
    parser.addini("ppsweep_dry_run", DRY_RUN_HELP, type="bool", default=False)
    group.addoption(
        "--ppsweep-reap",
        dest="ppsweep_reap",
        action="store_true",
        default=False,
        help="before the first boot, stop and remove the rank containers/processes that earlier "
        "(crashed or killed) runs left on the nodes of an ssh cluster, found by their labels. "
        "Without it such leftovers are only reported.",
    )
    group.addoption(
        "--ppsweep-slurm-jobid",
        dest="ppsweep_slurm_jobid",
        default="",
        metavar="JOBID",
        help="run the slurm cluster's layouts as steps of this Slurm allocation (one you already "
        "hold: salloc/sbatch) instead of making one; overrides its 'jobid' key. The allocation "
        "is left as it was at the end.",
    )
    group.addoption(
        "--ppsweep-profile",
        dest="ppsweep_profile",
        action="store_true",
        default=False,
        help=PROFILE_HELP,
    )
    parser.addini("ppsweep_profile", PROFILE_HELP, type="bool", default=False)

    add_adaptive_options(group)
    add_comm_option(group)
    add_wait_cluster_option(group, parser)


WAIT_CLUSTER_HELP = (
    "when another sweep holds the cluster (its claim on node 0, refreshed by a heartbeat), wait "
    "up to SECONDS for it (no value: as long as it takes), shown in the live status. Default: "
    "refuse at once, before anything is launched."
)


def add_wait_cluster_option(group: Any, parser: pytest.Parser) -> None:
    """--ppsweep-wait-cluster [SECONDS] (cluster/claim.py)."""
    group.addoption(
        "--ppsweep-wait-cluster",
        dest="ppsweep_wait_cluster",
        nargs="?",
        const="inf",
        default=None,
        metavar="SECONDS",
        help=WAIT_CLUSTER_HELP,
    )
    parser.addini("ppsweep_wait_cluster", WAIT_CLUSTER_HELP, default=None)


def wait_cluster_s(config: pytest.Config) -> float:
    """Seconds to wait for a cluster another sweep holds: 0 (refuse), a number, or inf."""
    value = get(config, "ppsweep_wait_cluster")
    if value is None or value == "":
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise pytest.UsageError(f"--ppsweep-wait-cluster: expected seconds >= 0 (or no value: "
                                f"wait as long as it takes), found {value!r}")
    return seconds


def add_adaptive_options(group: Any) -> None:
    """--ppsweep-adaptive and its tolerance (the planner decides what to boot)."""
    group.addoption(
        "--ppsweep-adaptive",
        dest="ppsweep_adaptive",
        action="store_true",
        default=False,
        help="boot first the layouts that tell the most, refit the planner's model after each, "
        "stop when the best layout is decided (its 90 %% interval clear of every other's, or "
        "the rest cannot beat it by more than the tolerance) and skip a third repeat that "
        "cannot change the decision; skipped layouts are 'predicted, not measured'. Serial "
        "runs only.",
    )
    group.addoption(
        "--ppsweep-adaptive-tolerance",
        dest="ppsweep_adaptive_tolerance",
        default=None,
        metavar="FRACTION",
        help="with --ppsweep-adaptive: how much better (Input TPS) an unbooted layout may "
        "still be predicted to be before the best counts as decided. Default: 0.03.",
    )


def adaptive_tolerance(config: pytest.Config) -> float | None:
    """The adaptive sweep's tolerance, or None without --ppsweep-adaptive."""
    raw = config.getoption("ppsweep_adaptive_tolerance", None)
    if not config.getoption("ppsweep_adaptive", False):
        if raw is not None:
            raise pytest.UsageError("--ppsweep-adaptive-tolerance: expected together with "
                                    "--ppsweep-adaptive, found it alone")
        return None
    if raw is None:
        return 0.03
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"--ppsweep-adaptive-tolerance: expected a fraction such as "
                                f"0.03, found {raw!r}") from None
    if not 0 <= value < 1:
        raise pytest.UsageError(f"--ppsweep-adaptive-tolerance: expected 0 <= value < 1, found "
                                f"{raw}")
    return value

PROFILE_HELP = (
    "profile window: after each layout's benchmark, one extra round (not in the medians) "
    "wrapped by the engine's profiler start and stop; every rank's trace collected into "
    "profile/<layout>/ and attributed by test_profile[<layout>] (seeds §9.3). Default: on for "
    "the layouts of a [profile] table, off without one."
)


def with_profile(config: pytest.Config, sweep: Sweep) -> Sweep:
    """``--ppsweep-profile`` (or its ini key) turns the profile window on with the defaults of
    :class:`ProfileSpec` when the sweep file has no [profile] table; docker clusters then get
    its output folder bind-mounted."""
    if sweep.profile is None and (
        config.getoption("ppsweep_profile") or config.getini("ppsweep_profile")
    ):
        sweep = replace(sweep, profile=ProfileSpec())
    return with_profile_mounts(sweep)


def add_comm_option(group: Any) -> None:
    """``--ppsweep-comm``: collect test_comm (the all-reduce benchmark per TP domain, §9.2)."""
    group.addoption(
        "--ppsweep-comm",
        dest="ppsweep_comm",
        action="store_true",
        default=False,
        help="run test_comm[<layout>]: an all-reduce sweep on each TP domain of every layout, "
        "after its benchmark with the service stopped ([comm] in the sweep file sets sizes, "
        "iterations and the tool; the table alone enables it too).",
    )


def with_comm(config: pytest.Config, sweep: Sweep) -> Sweep:
    """``--ppsweep-comm`` without a [comm] table: the table's defaults (1 KiB … 256 MiB)."""
    if config.getoption("ppsweep_comm", False) and sweep.comm is None:
        return replace(sweep, comm=CommSpec())
    return sweep


def get(config: pytest.Config, name: str) -> str | None:
    """The option if given, else the ini key of the same name."""
    value = config.getoption(name)
    if value is None:
        ini = config.getini(name)
        value = ini if ini else None
    return str(value) if value is not None else None


def _number(config: pytest.Config, name: str, kind: type[float] | type[int]) -> float | None:
    raw = get(config, name)
    if raw is None:
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise pytest.UsageError(
            f"--{name.replace('_', '-')}: expected {'an integer' if kind is int else 'a number'}"
            f", found {raw!r}"
        ) from None
    if value <= 0:
        raise pytest.UsageError(f"--{name.replace('_', '-')}: expected a value > 0, found {raw}")
    return value


def find_matrix(config: pytest.Config) -> Path | None:
    """``--ppsweep-matrix``, else ppsweep.toml next to the first test path given to pytest."""
    explicit = get(config, "ppsweep_matrix")
    if explicit:
        path = Path(explicit)
        return path if path.is_absolute() else Path(config.invocation_params.dir) / path
    for arg in config.args:
        p = Path(arg.split("::")[0])
        p = p if p.is_absolute() else Path(config.invocation_params.dir) / p
        folder = p if p.is_dir() else p.parent
        if (folder / "ppsweep.toml").is_file():
            return folder / "ppsweep.toml"
    return None


def selected_ids(config: pytest.Config, sweep: Sweep) -> list[str]:
    """Configurations chosen by --ppsweep-config (all when not given), in sweep order."""
    selectors = [s.strip() for v in config.getoption("ppsweep_config") for s in v.split(",")]
    selectors = [s for s in selectors if s]
    if not selectors:
        return [c.id for c in sweep.configs]
    unknown = [s for s in selectors if not select(sweep.configs, s)]
    if unknown:
        ids = [c.id for c in sweep.configs]
        hints = unknown_selector(sweep.configs, unknown[0])
        raise pytest.UsageError(
            f"--ppsweep-config: {', '.join(unknown)} matches no configuration of {sweep.path}"
            f"{hints}; expected one of {', '.join(ids)} (or ppN, ppN-tpM)"
        )
    chosen = {c.id for s in selectors for c in select(sweep.configs, s)}
    return [c.id for c in sweep.configs if c.id in chosen]


def selected_concurrencies(config: pytest.Config, sweep: Sweep) -> frozenset[int] | None:
    """The concurrencies chosen by --ppsweep-concurrency (None: every one of the workloads)."""
    given = [s.strip() for v in config.getoption("ppsweep_concurrency") for s in v.split(",")]
    given = [s for s in given if s]
    if not given:
        return None
    named = sweep.workloads.values() or [sweep.workload]
    known = tuple(dict.fromkeys(c for w in named for c in w.concurrency))
    chosen: set[int] = set()
    for value in given:
        if not value.isdigit() or int(value) not in known:
            raise pytest.UsageError(
                f"--ppsweep-concurrency: expected one of {', '.join(map(str, known))} (the "
                f"concurrency of {sweep.path}'s workloads), found {value!r}")
        chosen.add(int(value))
    return frozenset(chosen)


def load_sweep(config: pytest.Config, matrix: Path) -> Sweep:
    """The sweep file with every command-line override applied; bad input → UsageError."""
    try:
        sweep = load(matrix, get(config, "ppsweep_cluster"), get(config, "ppsweep_image"))
    except MatrixError as exc:
        # a sweep file that is not there: say where its name came from
        given = get(config, "ppsweep_matrix")
        source = "--ppsweep-matrix: " if given and not matrix.is_file() else ""
        raise pytest.UsageError(f"{source}{exc}") from None
    w = sweep.workload
    repeats = _number(config, "ppsweep_repeats", int)
    requests = _number(config, "ppsweep_requests", int)
    workload = replace(
        w,
        repeats=int(repeats) if repeats else w.repeats,
        num_requests=int(requests) if requests else w.num_requests,
    )
    boot = _number(config, "ppsweep_boot_timeout", float)
    boots = _number(config, "ppsweep_boots", int)
    rule = get(config, "ppsweep_spread_rule")
    if rule is not None and rule not in SPREAD_RULES:
        raise pytest.UsageError(
            f"--ppsweep-spread-rule: expected one of {', '.join(SPREAD_RULES)}, found {rule!r}"
        )
    sweep = replace(
        sweep,
        workload=workload,
        boot_timeout_s=boot or sweep.boot_timeout_s,
        min_repeats=min(sweep.min_repeats, workload.repeats),
        spread_rule=rule or sweep.spread_rule,
        max_repeats=max(sweep.max_repeats, workload.repeats),
        boots=int(boots) if boots else sweep.boots,
    )
    sweep = _named_workloads_cut(sweep, repeats, requests)
    scale = _number(config, "ppsweep_time_scale", float)
    if scale:
        # every cluster of the pool (``--ppsweep-cluster a,b``), not only the first
        try:
            pool = sweep.pool(get(config, "ppsweep_cluster"))
        except MatrixError as exc:
            raise pytest.UsageError(str(exc)) from None
        clusters = dict(sweep.clusters)
        for cluster in pool:
            env = {**cluster.env, "PPSWEEP_SIM_TIME_SCALE": str(scale)}
            clusters[cluster.name] = replace(cluster, env=env)
        sweep = replace(sweep, clusters=clusters)
    return with_comm(config, with_profile(config, sweep))


def reports_root(config: pytest.Config) -> Path:
    root = Path(get(config, "ppsweep_reports") or "reports")
    return root if root.is_absolute() else Path(config.rootpath) / root


def path_arg(config: pytest.Config, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def thresholds(config: pytest.Config, sweep: Sweep) -> dict[str, Any]:
    """Gate thresholds: options, else [sweep] thresholds, else the gate's defaults."""
    from pytest_ppsweep.gate.comparison import ThresholdError, parse_thresholds

    given = list(config.getoption("ppsweep_threshold"))
    where = "--ppsweep-threshold" if given else f"{sweep.path}: key 'sweep.thresholds'"
    try:
        return dict(parse_thresholds(given or list(sweep.thresholds)))
    except ThresholdError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def reference(config: pytest.Config, option: str) -> Path | None:
    """The run folder an option names (a path, run id or baseline name), or None."""
    value = get(config, option)
    if not value:
        return None
    from pytest_ppsweep.gate.baselines import BaselineError, resolve
    from pytest_ppsweep.results.aggregate import RunFolderError

    try:
        return resolve(
            str(path_arg(config, value)) if "/" in value else value, reports_root(config)
        )
    except (BaselineError, RunFolderError) as exc:
        raise pytest.UsageError(f"--{option.replace('_', '-')}: {exc}") from None


def _named_workloads_cut(sweep: Sweep, repeats: Any, requests: Any) -> Sweep:
    """``--ppsweep-repeats`` / ``--ppsweep-requests`` applied to every named workload too."""
    if not sweep.workloads or not (repeats or requests):
        return sweep
    named = {n: replace(w, repeats=int(repeats) if repeats else w.repeats,
                        num_requests=int(requests) if requests else w.num_requests)
             for n, w in sweep.workloads.items()}
    fewest = min(w.repeats for w in named.values())
    most = max(w.repeats for w in named.values())
    return replace(sweep, workloads=named, min_repeats=min(sweep.min_repeats, fewest),
                   max_repeats=max(sweep.max_repeats, most))
