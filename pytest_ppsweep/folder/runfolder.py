"""The run folder, ``reports/<run_id>/``: its one owner.

Every file name, column and run.json key of a run folder is named here, once; the rest of the
package spells them through this module (tests/test_runfolder.py walks the source for a file
name literal anywhere else). :class:`RunFolder` reads a folder (any format version, written by
this or an older plugin); :class:`RunStore` writes one as the run produces it, and
:class:`RunJson` owns ``metadata/run.json``.

Every result is written the moment it is produced, so a crash or Ctrl-C keeps every finished
round: ``results.csv`` gains one flushed row per round (appended under the folder's ``flock``),
raw per-request JSONL lines are appended as requests complete, and each fact about a
configuration is appended to ``metadata/configs.facts.jsonl`` as it is learnt; ``configs.csv`` is
folded from it (rewritten atomically) once a phase of a layout ends and when the run closes, and
a reader of the folder sees the facts a crash left in the journal only (configs.csv plus the
journal is every fact learnt).
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO, TypeAlias

from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, ENGINES
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.redact import redact_toml

# -- the format ---------------------------------------------------------------------------------

# The run folder's format, written in run.json (``format_version``). 1: every folder written
# before the key existed (results.csv without the decode or ``extra`` columns, configs.csv
# without ``boot_of``: readers fill what a column they miss means). 2: run.json names it. 3:
# run.json names the engine (``engine``, ``engine_version``) where 2 wrote the engine's own
# version key (each engine's ``legacy_version_key``: ``engine_facts`` reads both).
FORMAT_VERSION = 3
FORMAT_VERSION_KEY = "format_version"
UNVERSIONED = 1

# -- file and folder names ----------------------------------------------------------------------

RESULTS_CSV = "results.csv"
CONFIGS_CSV = "configs.csv"
SUMMARY_CSV = "summary.csv"
COMPARISONS_CSV = "comparisons.csv"
PROGRESS_LOG = "progress.log"
REPORT_HTML = "report.html"
REBUILT_HTML = "report-rebuilt.html"
BENCHMARK_JSON = "benchmark.json"
GATE_CSV = "gate.csv"
ANSWERS_JSON = "answers.json"
SLO_PROBES_CSV = "slo_probes.csv"
PARETO_CSV = "pareto.csv"
PROFILE_CSV = "profile.csv"
COMM_CSV = "comm.csv"
COMM_SUMMARY_CSV = "comm_summary.csv"
LOCK_FILE = ".lock"
# In the reports folder, beside the run folders: the run history (gate/history.py), a cache of
# the run folders that `python -m pytest_ppsweep history --rebuild` makes anew from them.
HISTORY_DB = "history.sqlite"

METADATA_DIR = "metadata"
SERVICE_DIR = "service"
RAW_DIR = "raw"
GPU_DIR = "gpu"
BENCH_DIR = "bench"
PROFILE_DIR = "profile"
COMM_DIR = "comm"
PLANNER_DIR = "planner"
SLO_DIR = "slo"
OUTPUTS_DIR = "outputs"  # outputs/<point>.json: the correctness probe (results/outputs.py)
ACCURACY_DIR = "accuracy"  # accuracy/<point>.json: the [accuracy] task score (results/accuracy.py)
# made when the folder is opened
SUBDIRS = (METADATA_DIR, SERVICE_DIR, RAW_DIR, GPU_DIR, BENCH_DIR)

RUN_JSON = f"{METADATA_DIR}/run.json"
# each configs.csv fact as it is learnt, one JSON line each (append-only, the crash-safe copy of
# the facts not in configs.csv yet): folded into configs.csv when a phase of a layout ends and
# when the run closes
CONFIG_FACTS_JSONL = f"{METADATA_DIR}/configs.facts.jsonl"
PHASES_JSON = f"{METADATA_DIR}/phases.json"
BASELINE_JSON = f"{METADATA_DIR}/baseline.json"
# metadata/live/<pid>.json: what each process of a running sweep is doing now (LiveRecord)
LIVE_DIR = f"{METADATA_DIR}/live"
PLAN_CSV_NAME = "plan.csv"
PROFILE_JSON_NAME = "profile.json"  # a fitted profile (planner/fitting.py), in planner/ of a run
PLAN_CSV = f"{PLANNER_DIR}/{PLAN_CSV_NAME}"
PLANNER_PROFILE_JSON = f"{PLANNER_DIR}/{PROFILE_JSON_NAME}"
ADAPTIVE_JSON = f"{PLANNER_DIR}/adaptive.json"
ATTRIBUTION_JSON = "attribution.json"  # in profile/<config>/

# What a person opens first (the report's evidence links), in that order.
EVIDENCE = (RESULTS_CSV, SUMMARY_CSV, CONFIGS_CSV, f"{SERVICE_DIR}/", f"{RAW_DIR}/",
            f"{GPU_DIR}/", f"{METADATA_DIR}/")
# What a named baseline keeps of its run (gate/baselines.py), metadata/ beside.
BASELINE_FILES = (RESULTS_CSV, CONFIGS_CSV, SUMMARY_CSV)
# A run whose cluster claim another run took mid-run: when, per cluster (session/claims.py); the
# rounds measured since are INVALID (results/verdict.py).
CLAIM_LOST_JSON = f"{METADATA_DIR}/claim_lost.json"
# What a point's verdict is judged from (results/verdict.point_verdict).
JUDGED_FILES = (RESULTS_CSV, CONFIGS_CSV, RUN_JSON, CLAIM_LOST_JSON)


def manifest_json(config_id: str) -> str:
    """``metadata/<config>.manifest.json``: what reuse and resume compare."""
    return f"{METADATA_DIR}/{config_id}.manifest.json"


def server_info_json(config_id: str) -> str:
    """``metadata/<config>.server_info.json``: the booted server's facts (redacted)."""
    return f"{METADATA_DIR}/{config_id}.server_info.json"


def server_info_candidates(config_id: str) -> tuple[str, ...]:
    """Where the planner looks for a layout's resolved server info (planner/data.py): where a
    run writes it (:func:`server_info_json`) first, then where older tools put it."""
    return (server_info_json(config_id), f"{METADATA_DIR}/{config_id}.json",
            f"{METADATA_DIR}/server_info/{config_id}.json",
            f"{METADATA_DIR}/{config_id}/server_info.json")


def groups_json(config_id: str) -> str:
    """``metadata/<config>.groups.json``: a layout of several server groups, per group: its log
    scan and its worst-rank GPU memory at each moment (measure/groupfacts.py)."""
    return f"{METADATA_DIR}/{config_id}.groups.json"


def tests_json(config_id: str) -> str:
    """``metadata/tests/<config>.json``: each test's outcome of a layout (resume)."""
    return f"{METADATA_DIR}/tests/{config_id}.json"


def nodes_json(cluster: str) -> str:
    """``metadata/nodes-<cluster>.json``: what preflight found of a cluster's nodes."""
    return f"{METADATA_DIR}/nodes-{cluster}.json"


def live_json(pid: int) -> str:
    """``metadata/live/<pid>.json``: the layouts one process of a running sweep is busy with."""
    return f"{LIVE_DIR}/{pid}.json"


def slo_outcome_json(config_id: str) -> str:
    """``slo/<config>.json``: a layout's SLO search outcome."""
    return f"{SLO_DIR}/{config_id}.json"


def accuracy_json(config_id: str) -> str:
    """``accuracy/<config>.json``: a layout's task score, its interval and its plan."""
    return f"{ACCURACY_DIR}/{config_id}.json"


def accuracy_answers_jsonl(config_id: str) -> str:
    """``accuracy/<config>.answers.jsonl``: each question's completion, one line as answered."""
    return f"{ACCURACY_DIR}/{config_id}.answers.jsonl"


def accuracy_lm_eval_dir(config_id: str) -> str:
    """``accuracy/lm-eval/<config>/``: the generated lm-eval task (YAML, JSONL) and its output."""
    return f"{ACCURACY_DIR}/lm-eval/{config_id}"


# In accuracy/lm-eval/<config>/ (run/accuracy_step.py): the task lm-eval runs (the questions, the
# shots, the task YAML), the worker's arguments, its per-question answers and its log.
LM_EVAL_QUESTIONS = "questions.jsonl"
LM_EVAL_SHOTS = "shots.jsonl"
LM_EVAL_TASK_YAML = "ppsweep_accuracy.yaml"
LM_EVAL_ARGS = "args.json"
LM_EVAL_SAMPLES = "samples.json"
LM_EVAL_LOG = "lm-eval.log"


def profile_request_json(config_id: str) -> str:
    return f"{PROFILE_DIR}/{config_id}/request.json"


# -- per-layout files inside service/<config>/ and comm/<config>/<domain>/ ----------------------

LAUNCH_SH = "launch.sh"  # service/<config>/: every node's rank command, as launched (redacted)
BOOT_FAILURE_TXT = "boot-failure.txt"  # service/<config>/: the evidence of a failed boot
COMM_COMMANDS_TXT = "commands.txt"  # comm/<config>/<domain>/: the worker's command per node


def node_log_name(node_rank: int, group: str = "") -> str:
    """``node<r>.log``: a rank's log (service/<config>/, comm/<config>/<domain>/);
    ``<group>-node<r>.log`` for a rank of a labelled server group (a layout of several)."""
    return f"{group}-node{node_rank}.log" if group else f"node{node_rank}.log"


def docker_run_name(node_rank: int) -> str:
    """``node<r>.docker-run.sh``: the ``docker run`` line of a rank's container (redacted)."""
    return f"node{node_rank}.docker-run.sh"


def topo_name(node_rank: int) -> str:
    """``topo-node<r>.txt``: ``nvidia-smi topo -m`` of a node (comm/<config>/)."""
    return f"topo-node{node_rank}.txt"


# -- columns ------------------------------------------------------------------------------------

RESULT_COLUMNS = (
    "run_id",
    "config_id",
    "pp",
    "tp",
    "ep",
    "concurrency",
    "repeat",
    "num_requests",
    "completed",
    "failed",
    "duration_s",
    "input_tokens",
    "input_tokens_nominal",
    "input_tps",
    "input_tps_nominal",
    "output_tokens",
    "output_tokens_nominal",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "tpot_mean_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "itl_mean_s",
    "itl_p50_s",
    "itl_p99_s",
    "output_tps",
    "peak_concurrency",
    "prompt_digest",
    "time_scale",
    "simulated",
    "reused",
    # True for a round beyond the planned repeats (adaptive repeats, stats/spread.py).
    "extra",
    # Which boot of its layout measured the round: a digest of the boot's token (not the
    # token itself); rounds of one boot share it (results/questions.py: single-boot evidence).
    "boot",
    # A trace or shared-prefix workload's prefix hit rate: implied by its sharing, achieved by
    # the server over the round (empty: not measured), its source ("server counters",
    # "per-request cached_tokens", "not measured: <why>") and the tolerance (measure/bench.py);
    # a round beyond the tolerance does not count (measure/completion.py). Empty otherwise.
    "hit_rate_implied",
    "hit_rate_achieved",
    "hit_rate_source",
    "hit_rate_tolerance",
    # The round's GPU board energy (not wall power) and its price per token and per request
    # (measure/energy.py ENERGY_COLUMNS): blank with its reasons where it is not valid.
    "energy_j",
    "energy_j_per_input_token",
    "energy_j_per_output_token",
    "energy_j_per_total_token",
    "energy_j_per_request",
    "energy_method",
    "energy_reasons",
    "energy_schema",
)
CONFIG_COLUMNS = (
    "config_id",
    "pp",
    "tp",
    "ep",
    "order",
    "boot_ok",
    "boot_s",
    "boot_error",
    "topology_ok",
    "pp_max_micro_batch_size",
    "log_clean",
    "log_findings",
    "mem_peak_mib",
    "mem_total_mib",
    "mem_headroom_mib",
    "mem_worst_node",
    "mem_worst_gpu",
    "cluster",
    "held_s",
    "boot_of",
    # the KV cache's capacity the engine reports (tokens) and how many requests of the point's
    # workload (input + output tokens each) it holds at once
    "kv_tokens",
    "kv_requests",
)

# slo_probes.csv: one row per SLO probe (run/slo_search.py)
PROBE_COLUMNS = (
    "run_id", "config_id", "pp", "tp", "ep", "gpus", "workload", "search", "probe", "phase",
    "load", "request_rate", "concurrency", "within", "reasons", "num_requests", "completed",
    "failed", "good", "goodput_rps", "attainment", "duration_s", "input_tps", "output_tps",
    "input_tps_per_gpu", "output_tps_per_gpu", "tps_per_user", "ttft_p50_s", "ttft_p99_s",
    "tpot_p50_s", "tpot_p99_s", "itl_p99_s", "e2e_p50_s", "e2e_p99_s", "lag_p99_raw_s",
    "usd_per_m_input", "usd_per_m_output", "time_scale", "simulated", "over_limit",
)  # fmt: skip

# -- run.json -----------------------------------------------------------------------------------


class RunKey:
    """Every top-level key of ``metadata/run.json``, named once: its writer (:class:`RunJson`)
    and every reader spell them through this class (tests/folder/test_runfolder.py fails on a
    run.json key read with a string literal anywhere else)."""

    FORMAT_VERSION: Final = FORMAT_VERSION_KEY  # the folder's format (FORMAT_VERSION)
    RUN_ID: Final = "run_id"
    SWEEP: Final = "sweep"  # the sweep's name
    BASELINE: Final = "baseline"  # the baseline layout's id
    ORDER: Final = "order"  # every layout's id, in sweep order
    CLUSTER: Final = "cluster"  # the pool's cluster names, comma-separated
    HOSTS: Final = "hosts"  # the pool's node addresses (known once the nodes are)
    SIMULATED: Final = "simulated"
    TIME_SCALE: Final = "time_scale"  # the emulator's factor (1.0 on a real server)
    IMAGE: Final = "image"
    MODEL_PATH: Final = "model_path"
    MATRIX: Final = "matrix"  # the sweep file's path
    SPREAD_THRESHOLD: Final = "spread_threshold"
    MIN_REPEATS: Final = "min_repeats"
    SPREAD_RULE: Final = "spread_rule"
    MAX_REPEATS: Final = "max_repeats"
    BOOTS: Final = "boots"  # each layout's boots in this run (--ppsweep-boots)
    # the boot-to-boot variance the reports folder's history measured, per metric column, as
    # the run's close found it: {column: {var, df, configurations, runs}} (results/questions.py)
    BOOT_HISTORY: Final = "boot_history"
    COMPARE: Final = "compare"  # the decision rule's parameters (CompareKey)
    EXPECT: Final = "expect"  # [[expect]]: the failures expected (ExpectKey)
    WORKLOAD: Final = "workload"  # the sweep's workload (Workload.as_json)
    GPU_HOUR_USD: Final = "gpu_hour_usd"
    ENGINE: Final = "engine"  # the serving engine's name (engine/engines.py)
    ENGINE_VERSION: Final = "engine_version"  # what its server info says (format ≤ 2: legacy)
    RUN_STATUS: Final = "run_status"  # running, complete, partial, interrupted
    RUN_STATUS_DETAIL: Final = "run_status_detail"  # results/runstatus.RunStatus.detail
    OWNER: Final = "owner"  # the process that runs it (OwnerKey)
    GIT_COMMIT: Final = "git_commit"  # the sweep file's checkout (None outside git)
    # pytest's arguments as given (the commands the run prints start from them:
    # results/commands.py)
    ARGS: Final = "args"
    # an axis sweep's (axis_fields)
    POINTS: Final = "points"  # per point: its layout, axis values, workload (point_facts)
    AXES: Final = "axes"
    COMPARE_BASELINE: Final = "compare_baseline"
    WORKLOADS: Final = "workloads"  # the named workloads
    CONCURRENCIES: Final = "concurrencies"
    # written after the set-up
    SELECTED: Final = "selected"  # the layouts and Cs of the tests the collection selected
    BASELINE_FROM: Final = "baseline_from"  # the earlier run the deltas come from (SourceKey)
    BASELINE_NOTE: Final = "baseline_note"  # why there is none
    SLURM_JOBS: Final = "slurm_jobs"  # the controller's allocation of each slurm cluster
    ADAPTIVE: Final = "adaptive"  # --ppsweep-adaptive
    ADAPTIVE_SKIPPED: Final = "adaptive_skipped"  # the layouts it predicted, with why

    @classmethod
    def all(cls) -> frozenset[str]:
        return frozenset(v for k, v in vars(cls).items() if k.isupper())


class CompareKey:
    """run.json ``compare``: the decision rule's parameters (results/rule.rule_of)."""

    ALPHA: Final = "alpha"
    MIN_EFFECT_PCT: Final = "min_effect_pct"
    SEQUENTIAL: Final = "sequential"
    BOOT_NOISE_PCT: Final = "boot_noise_pct"
    ONE_BOOT_BOUND_PCT: Final = "one_boot_bound_pct"


class ExpectKey:
    """Each entry of run.json ``expect`` (results/questions.expectations_of)."""

    LAYOUT: Final = "layout"
    AXES: Final = "axes"
    FAILURE: Final = "failure"
    REASON: Final = "reason"


class OwnerKey:
    """run.json ``owner``: the process that runs the run (results/livestatus.py)."""

    HOST: Final = "host"
    PID: Final = "pid"
    RESUME: Final = "resume"


class PointKey:
    """Each point's facts in run.json ``points`` (:func:`point_facts`): what the results layer
    groups comparisons by (results/confound.py, results/questions.py)."""

    LAYOUT: Final = "layout"  # pp<P>-tp<T>-ep<E>, the EP asked for
    RUNS: Final = "runs"  # the layout id it runs as (SGLang's EP = TP rewrite)
    AXES: Final = "axes"  # its axis values
    TAGS: Final = "tags"  # its id's axis parts
    WORKLOAD: Final = "workload"  # its workload's name ("" for a sweep's one workload)
    ASKED_EP: Final = "asked_ep"
    EP: Final = "ep"


def point_facts(configs: Iterable[Config]) -> dict[str, dict[str, Any]]:
    """Per point id: its layout, axis values, workload and EP rewrite (run.json ``points``,
    what the results layer groups comparisons by)."""
    facts = {}
    for c in configs:
        lead = c.deployment.lead
        asked = c.asked_ep or lead.ep
        # a layout of several server groups is its deployment's id, never its lead group's
        layout = c.layout_id if c.deployed is not None else f"pp{lead.pp}-tp{lead.tp}-ep{asked}"
        facts[c.id] = {PointKey.LAYOUT: layout,
                       PointKey.RUNS: c.layout_id, PointKey.AXES: dict(c.axes),
                       PointKey.TAGS: list(c.tags), PointKey.WORKLOAD: c.workload,
                       PointKey.ASKED_EP: asked, PointKey.EP: lead.ep}
    return facts


class SourceKey:
    """run.json ``baseline_from``: the earlier run a baseline's deltas come from."""

    RUN_ID: Final = "run_id"
    PATH: Final = "path"
    CHOSEN: Final = "chosen"


# run.json as read (RunFolder.read_run_json, results/aggregate.RunData.run_json): a function
# that takes it says so with this type (tests/folder/test_runfolder.py follows it)
RunJsonDict: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class RunOwner:
    """run.json ``owner``: the process that runs the run (its host and pid, and the command
    that resumes it); empty for a folder written before it, or a broken entry."""

    host: str = ""
    pid: int = 0
    resume: str | None = None

    @classmethod
    def of(cls, meta: RunJsonDict) -> RunOwner:
        owner = meta.get(RunKey.OWNER)
        if not isinstance(owner, dict):
            return cls()
        try:
            pid = int(owner.get(OwnerKey.PID) or 0)
        except (TypeError, ValueError):
            pid = 0
        resume = owner.get(OwnerKey.RESUME)
        return cls(str(owner.get(OwnerKey.HOST) or ""), pid, str(resume) if resume else None)

# what the first boot's server info says (kept by a resumed run until it boots)
LEARNT_AT_BOOT = (RunKey.ENGINE_VERSION, RunKey.TIME_SCALE, RunKey.SIMULATED)
# format ≤ 2: the key each engine's version was written under → the engine
LEGACY_VERSION_KEYS: Mapping[str, str] = {
    e.legacy_version_key: name for name, e in ENGINES.items() if e.legacy_version_key}


def engine_facts(meta: Mapping[str, Any]) -> tuple[str, str | None]:
    """(engine, its version) of a run.json of any format: format 3's ``engine`` and
    ``engine_version``; a folder of format ≤ 2 names no engine and wrote the version under the
    engine's own key (the default engine's, whose name it then is)."""
    engine = meta.get(RunKey.ENGINE)
    version = meta.get(RunKey.ENGINE_VERSION)
    if not isinstance(engine, str) or not engine:
        engine = next((name for key, name in LEGACY_VERSION_KEYS.items() if key in meta),
                      DEFAULT_ENGINE)
    if version is None:
        version = next((meta[key] for key in LEGACY_VERSION_KEYS if meta.get(key) is not None),
                       None)
    return engine, None if version is None else str(version)


def new_run_id(name: str, now: datetime | None = None) -> str:
    """``<sweep name>-YYYYmmdd-HHMMSS`` like the seeds' run ids."""
    return f"{name}-{(now or datetime.now()).strftime('%Y%m%d-%H%M%S')}"


def atomic_write(path: Path, text: str) -> None:
    """``text`` into ``path`` through a temporary file beside it (never a torn file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"


class RunFolder:
    """A run folder's paths and typed readers (any format version). Each reader reads its file
    when called: a caller that needs a file twice keeps what it read."""

    def __init__(self, path: Path | str) -> None:
        self.dir = Path(path)

    # paths
    def file(self, relpath: str) -> Path:
        return self.dir / relpath

    @property
    def results_csv(self) -> Path:
        return self.dir / RESULTS_CSV

    @property
    def configs_csv(self) -> Path:
        return self.dir / CONFIGS_CSV

    @property
    def summary_csv(self) -> Path:
        return self.dir / SUMMARY_CSV

    @property
    def comparisons_csv(self) -> Path:
        return self.dir / COMPARISONS_CSV

    @property
    def run_json(self) -> Path:
        return self.dir / RUN_JSON

    @property
    def metadata(self) -> Path:
        return self.dir / METADATA_DIR

    def service_dir(self, config_id: str) -> Path:
        return self.dir / SERVICE_DIR / config_id

    def raw_dir(self, config_id: str) -> Path:
        return self.dir / RAW_DIR / config_id

    def gpu_dir(self, config_id: str) -> Path:
        return self.dir / GPU_DIR / config_id

    def comm_dir(self, config_id: str) -> Path:
        return self.dir / COMM_DIR / config_id

    def profile_dir(self, config_id: str) -> Path:
        return self.dir / PROFILE_DIR / config_id

    def is_run(self) -> bool:
        """A folder a run wrote: it has run.json."""
        return self.run_json.is_file()

    # readers
    def read_run_json(self, *, strict: bool = False) -> RunJsonDict:
        """run.json as a dict ({} when missing or not an object; when torn too, unless
        ``strict``: then the ValueError of its JSON)."""
        try:
            raw = json.loads(self.run_json.read_text(encoding="utf-8"))
        except OSError:
            return {}
        except ValueError:
            if strict:
                raise
            return {}
        return raw if isinstance(raw, dict) else {}

    def format_version(self, meta: Mapping[str, Any] | None = None) -> int:
        """The folder's format: run.json's ``format_version``, else 1 (written before it)."""
        meta = self.read_run_json() if meta is None else meta
        value = meta.get(FORMAT_VERSION_KEY, UNVERSIONED)
        return value if isinstance(value, int) else UNVERSIONED

    def result_rows(self) -> list[dict[str, str]]:
        """results.csv as rows of strings ([] before the first round); a line being appended
        is left out."""
        return _csv_rows(self.results_csv)

    def config_rows(self) -> dict[str, dict[str, Any]]:
        """configs.csv as {config id: row}, with the facts learnt since it was last written
        (``metadata/configs.facts.jsonl``: a run that crashed keeps every fact it learnt). The
        cells are strings, as the CSV has them."""
        rows: dict[str, dict[str, Any]] = {
            row["config_id"]: row for row in _csv_rows(self.configs_csv, whole=False)}
        for facts in self._config_facts():
            cid = str(facts.get("config_id", ""))
            rows.setdefault(cid, {"config_id": cid}).update(facts)
        return rows

    def _config_facts(self) -> Iterator[dict[str, str]]:
        """The facts journal's lines in the order they were learnt (a torn last line, being
        appended when the run stopped, left out)."""
        path = self.dir / CONFIG_FACTS_JSONL
        if not path.is_file():
            return
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    facts = json.loads(line)
                except ValueError:
                    continue
                if isinstance(facts, dict) and facts.get("config_id"):
                    yield facts

    def live_records(self) -> list[dict[str, Any]]:
        """Every process's live record (``metadata/live/<pid>.json``, :class:`LiveRecord`),
        oldest first ([] when none is left: the run closed, or nothing ran yet)."""
        folder = self.dir / LIVE_DIR
        out = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # removed meanwhile (its process ended), or torn: the next read has it
            if isinstance(raw, dict) and isinstance(raw.get("layouts"), dict):
                out.append(raw)
        return sorted(out, key=lambda r: float(r.get("updated") or 0.0))

    def recorded_run_id(self) -> str:
        """The run id in run.json (a named baseline keeps its run's), else the folder's name."""
        return str(self.read_run_json().get(RunKey.RUN_ID) or self.dir.name)


    def slo_probes(self) -> list[dict[str, str]]:
        """``slo_probes.csv`` as rows of strings (empty without one; a line being appended is
        left out)."""
        return _csv_rows(self.dir / SLO_PROBES_CSV)

    def slo_outcomes(self) -> list[dict[str, Any]]:
        """Every ``slo/<layout>.json`` of the folder, in file-name order (unreadable ones and
        ones without a layout left out)."""
        folder = self.dir / SLO_DIR
        out = []
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("config_id"):
                out.append(data)
        return out

    def comm_rows(self) -> list[dict[str, str]]:
        """``comm.csv`` (test_comm) as rows of strings ([] without one)."""
        return _csv_rows(self.dir / COMM_CSV, whole=False)

    def smi_texts(self) -> dict[str, str]:
        """Per node, the ``nvidia-smi -q`` the comm step saved (``comm/<layout>/smi-q-node<r>
        .txt``; the first layout that has it)."""
        texts: dict[str, str] = {}
        for path in sorted(self.dir.glob(f"{COMM_DIR}/*/smi-q-node*.txt")):
            node = path.stem.removeprefix("smi-q-")
            texts.setdefault(node, path.read_text(encoding="utf-8", errors="replace"))
        return texts

    def plan_rows(self) -> list[dict[str, str]]:
        """``planner/plan.csv`` as rows of strings ([] without a plan)."""
        return _csv_rows(self.dir / PLAN_CSV, whole=False)

    def planner_profile(self) -> dict[str, Any] | None:
        """``planner/profile.json`` parsed (None when absent, unreadable or not an object)."""
        try:
            raw = json.loads((self.dir / PLANNER_PROFILE_JSON).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return raw if isinstance(raw, dict) else None

    def _json_objects(self, pattern: str, name: Callable[[Path], str]) -> dict[str, Any]:
        """Each file matching ``pattern`` parsed, by ``name(path)`` (sorted paths); a file
        half-written by a crashed run, unreadable or not an object is left out."""
        found: dict[str, Any] = {}
        for path in sorted(self.dir.glob(pattern)):
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(raw, dict):
                found[name(path)] = raw
        return found

    def accuracy_scores(self) -> dict[str, dict[str, Any]]:
        """Per layout, ``accuracy/<config>.json`` parsed (results/accuracy.py reads its
        fields)."""
        return self._json_objects(f"{ACCURACY_DIR}/*.json", lambda p: p.stem)

    def attributions(self) -> dict[str, dict[str, Any]]:
        """Per profiled layout, ``profile/<config>/attribution.json`` parsed (by name)."""
        return self._json_objects(f"{PROFILE_DIR}/*/{ATTRIBUTION_JSON}", lambda p: p.parent.name)

    def files(self, meta: RunJsonDict | None = None,
              rounds: list[dict[str, str]] | None = None) -> FolderFiles:
        """The files the report's views show, each read once (:class:`FolderFiles`); ``meta``:
        run.json as read already (results/aggregate.RunData.run_json), else read here;
        ``rounds``: results.csv's rows as read already (RunData.result_rows), else read here."""
        return FolderFiles(self.dir, self.read_run_json() if meta is None else meta,
                           self.slo_probes(),
                           self.slo_outcomes(), self.comm_rows(), self.smi_texts(),
                           self.plan_rows(), self.planner_profile(), self.accuracy_scores(),
                           self.attributions(),
                           _csv_rows(self.results_csv) if rounds is None else rounds)


@dataclass(frozen=True)
class FolderFiles:
    """What the report's views show of a run folder besides its results (results/pipeline.py
    reads those), each file read once: the views get this, not a folder to parse."""

    dir: Path
    meta: RunJsonDict  # metadata/run.json ({} when missing or broken)
    probes: list[dict[str, str]]  # slo_probes.csv
    outcomes: list[dict[str, Any]]  # slo/<layout>.json
    comm: list[dict[str, str]]  # comm.csv
    smi: dict[str, str]  # per node: comm/<layout>/smi-q-node<r>.txt
    plan: list[dict[str, str]]  # planner/plan.csv
    planner_profile: dict[str, Any] | None  # planner/profile.json
    accuracy: dict[str, dict[str, Any]]  # per layout: accuracy/<layout>.json
    attributions: dict[str, dict[str, Any]]  # per layout: profile/<layout>/attribution.json
    rounds: list[dict[str, str]]  # results.csv's rows as written

    @classmethod
    def of(cls, source: Path | str | FolderFiles) -> FolderFiles:
        """``source`` itself when read already, else its files read now."""
        return source if isinstance(source, FolderFiles) else RunFolder(source).files()


# A view's argument: the files read already, or a run folder to read them from.
FolderSource = Path | FolderFiles


def _csv_rows(path: Path, whole: bool = True) -> list[dict[str, str]]:
    """A CSV file's rows ([] when there is none); ``whole``: a row short of cells (a line being
    appended) is left out."""
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return [dict(r) for r in csv.DictReader(fh) if not whole or None not in r.values()]


def csv_rows(text: str) -> list[dict[str, str]]:
    """The whole rows of a CSV file's ``text`` as read already (a row short of cells, a line
    being appended, is left out)."""
    return [dict(r) for r in csv.DictReader(io.StringIO(text, newline=""))
            if None not in r.values()]


def run_id_of(folder: Path) -> str:
    """The run id in ``folder``'s run.json (a named baseline keeps its run's), else its name."""
    return RunFolder(folder).recorded_run_id()


class RunStore(RunFolder):
    """Owns ``reports/<run_id>/`` for one run: the writers."""

    def __init__(self, root: Path, run_id: str) -> None:
        super().__init__(root / run_id)
        self.run_id = run_id
        for sub in SUBDIRS:
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def raw_path(self, config_id: str, concurrency: int, repeat: int) -> Path:
        path = self.raw_dir(config_id) / f"c{concurrency}-r{repeat}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def gpu_path(self, config_id: str, moment: str) -> Path:
        path = self.gpu_dir(config_id) / f"{moment}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write_json(self, relpath: str, data: Any) -> Path:
        path = self.dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, _json_text(data))
        return path

    def update_json(self, relpath: str, **fields: Any) -> None:
        """Merge ``fields`` into a JSON object file of the run folder."""
        path = self.dir / relpath
        with self.locked():
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            data.update(fields)
            atomic_write(path, _json_text(data))

    def copy_matrix(self, matrix: Path, shared: Iterable[Path] = ()) -> None:
        """The sweep file as evidence, and beside it the ``shared`` files its ``extends`` took
        tables from (each under its own name, so a copy of ``extends = "cluster.toml"`` reads
        as the sweep did; a name taken already gets an ``extends-<n>-`` prefix), with the
        values of secret-looking keys redacted."""
        copies = {matrix.name: matrix}
        for path in shared:
            name = path.name if path.name not in copies else f"extends-{len(copies)}-{path.name}"
            copies[name] = path
        for name, path in copies.items():
            text = path.read_text(encoding="utf-8")
            atomic_write(self.metadata / name, redact_toml(text))

    def append_result(self, row: Mapping[str, Any]) -> None:
        """One round, flushed to disk before returning."""
        unknown = set(row) - set(RESULT_COLUMNS)
        if unknown:
            raise ValueError(f"{RESULTS_CSV}: unknown columns {sorted(unknown)}")
        with self.locked():
            new = not self.results_csv.exists() or self.results_csv.stat().st_size == 0
            columns = RESULT_COLUMNS if new else self._results_header()
            with self.results_csv.open("a", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
                if new:
                    writer.writeheader()
                writer.writerow({k: _cell(row.get(k)) for k in columns})
                fh.flush()
                os.fsync(fh.fileno())

    def _results_header(self) -> tuple[str, ...]:
        """The columns results.csv was started with: a folder written by an older runstore
        (resumed) keeps its header, so a new round never shifts its cells under the old names.
        """
        with self.results_csv.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
        return tuple(header) if header else RESULT_COLUMNS

    def note_config(self, config_id: str, **facts: Any) -> None:
        """Facts about a configuration, learnt: one line appended to the facts journal (no
        rewrite of configs.csv; :meth:`fold_configs` writes it when the layout's phase ends)."""
        unknown = set(facts) - set(CONFIG_COLUMNS)
        if unknown:
            raise ValueError(f"{CONFIGS_CSV}: unknown columns {sorted(unknown)}")
        line = {"config_id": config_id, **{k: _text(_cell(v)) for k, v in facts.items()}}
        path = self.dir / CONFIG_FACTS_JSONL
        with self.locked(), path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True) + "\n")

    def fold_configs(self) -> None:
        """``configs.csv`` written once with every fact learnt so far (rewritten atomically);
        the journal then starts anew (it holds the facts not yet in configs.csv)."""
        journal = self.dir / CONFIG_FACTS_JSONL
        with self.locked():
            if journal.exists():
                self._write_configs(self.config_rows())
                journal.unlink()

    def update_config(self, config_id: str, **facts: Any) -> None:
        """Merge facts about a configuration into ``configs.csv`` now (noted, then folded)."""
        self.note_config(config_id, **facts)
        self.fold_configs()

    def _write_configs(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        ordered = sorted(rows.values(), key=lambda r: _order_key(r.get("order")))
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=CONFIG_COLUMNS)
        writer.writeheader()
        for r in ordered:
            writer.writerow({k: r.get(k, "") for k in CONFIG_COLUMNS})
        atomic_write(self.configs_csv, out.getvalue())

    def sort_results(self, order: list[str]) -> None:
        """Rewrite results.csv in sweep order (xdist workers append in completion order). A run
        that measured no round but tried a layout (configs.csv: every boot failed) gets the
        header alone, so that it still ends with its answers ("no valid point") and status."""
        if not self.results_csv.exists():
            if self.configs_csv.exists():
                atomic_write(self.results_csv, ",".join(RESULT_COLUMNS) + "\n")
            return
        rank = {cid: i for i, cid in enumerate(order)}
        with self.locked():
            rows = _csv_rows(self.results_csv)
            rows.sort(
                key=lambda r: (
                    rank.get(r["config_id"], len(rank)),
                    int(r["concurrency"]),
                    int(r["repeat"]),
                )
            )
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=RESULT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
            atomic_write(self.results_csv, out.getvalue())

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive access to the run folder's shared files, across threads and processes."""
        with self._lock, (self.dir / LOCK_FILE).open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def open_raw(self, config_id: str, concurrency: int, repeat: int) -> TextIO:
        return self.raw_path(config_id, concurrency, repeat).open("w", encoding="utf-8")

    def clear_live(self) -> None:
        """The run closed: no process of it is busy any more (``metadata/live/`` removed)."""
        folder = self.dir / LIVE_DIR
        for path in folder.glob("*.json") if folder.is_dir() else ():
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            folder.rmdir()


class LiveRecord:
    """``metadata/live/<pid>.json``: what this process is doing now, per layout: its phase
    (``booting``, ``benchmark c8 r2/3``, ``teardown``…), the phase's detail (``ranks ready
    2/4``), since when (epoch), whether a step is running (``active``) or the layout waits
    between two steps. One file per process (xdist workers too), each rewritten atomically by
    its own process only; ``python -m pytest_ppsweep show`` reads them all
    (:meth:`RunFolder.live_records`). Written on each change of phase or detail, never on a
    progress bar's redraw."""

    def __init__(self, folder: RunFolder, host: str, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.path = folder.dir / live_json(self.pid)
        self.host = host
        self.layouts: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def set(self, layout: str, phase: str, detail: str, now: float) -> None:
        """``layout`` is in ``phase`` (with ``detail``) now; written when either changed."""
        with self._lock:
            old = self.layouts.get(layout)
            if old and old["phase"] == phase and old["detail"] == detail and old["active"]:
                return
            since = old["since"] if old and old["phase"] == phase and old["active"] else now
            self.layouts[layout] = {"phase": phase, "detail": detail, "since": since,
                                    "active": True}
            self._write(now)

    def pause(self, layout: str, now: float) -> None:
        """The step of ``layout`` ended; the layout waits for its next one."""
        with self._lock:
            entry = self.layouts.get(layout)
            if entry is None or not entry["active"]:
                return
            entry.update(active=False, since=now)
            self._write(now)

    def done(self, layout: str, now: float) -> None:
        """``layout`` is finished in this process (torn down, or its boot failed)."""
        with self._lock:
            if self.layouts.pop(layout, None) is not None:
                self._write(now)

    def _write(self, now: float) -> None:
        body = {"pid": self.pid, "host": self.host, "updated": now, "layouts": self.layouts}
        with contextlib.suppress(OSError):  # a status, never a reason to fail the run
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, _json_text(body))


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e-3 and value != 0 else round(value, 6)
    return value


def _text(cell: Any) -> str:
    """A cell as csv writes it (and reads it back)."""
    return "" if cell is None else str(cell)


def _order_key(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 1 << 30


# the keys the session shares, by their older names
SELECTED = RunKey.SELECTED
ADAPTIVE_SKIPPED = RunKey.ADAPTIVE_SKIPPED
SLURM_JOBS = RunKey.SLURM_JOBS


class RunJson:
    """``metadata/run.json`` of one run folder, what the report needs to know about a run:
    created once by the folder's set-up, then merged into (the first boot adds the server's
    facts, the collection the selection, the adaptive sweep its skips; any other key through
    :meth:`update`)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.run_json

    def create(self, sweep: Sweep, pool: tuple[Cluster, ...], ids: list[str],
               owner: Mapping[str, Any] | None = None, args: Sequence[str] | None = None
               ) -> None:
        """What the report needs to know about the run (updated at each boot). A resumed run's
        run.json keeps what it recorded (the selection, what its boots learnt: the server's
        version and time scale) until this run records it anew: a resume that boots nothing,
        or is refused before its first boot, loses none of it. The run is ``running`` from
        here on; ``owner`` (``host``, ``pid``, ``resume``) names the process that runs it, so
        that a reader can tell a live run from one whose process was killed; ``args``:
        pytest's arguments, which the commands the run prints start from."""
        simulated = all(c.server_module.startswith("pytest_ppsweep.sim") for c in pool)
        try:
            kept = self.read() if self.path.is_file() else {}
        except ValueError:  # a torn file: written anew
            kept = {}
        # a folder of an earlier format: its engine's version learnt at boot under today's key
        version = engine_facts(kept)[1]
        kept = {k: v for k, v in kept.items() if k not in LEGACY_VERSION_KEYS}
        if version is not None and kept.get(RunKey.ENGINE_VERSION) is None:
            kept[RunKey.ENGINE_VERSION] = version
        self.store.write_json(
            RUN_JSON,
            kept | {
                RunKey.FORMAT_VERSION: FORMAT_VERSION,
                RunKey.RUN_ID: self.store.run_id,
                RunKey.SWEEP: sweep.name,
                RunKey.BASELINE: sweep.baseline,
                RunKey.ORDER: ids,
                RunKey.CLUSTER: ",".join(c.name for c in pool),
                RunKey.HOSTS: [h.address for c in pool for h in c.hosts],
                RunKey.SIMULATED: simulated,
                # The real factor comes from the server info of the first boot.
                RunKey.TIME_SCALE: 1.0,
                RunKey.IMAGE: sweep.image,
                RunKey.MODEL_PATH: sweep.model_path,
                RunKey.MATRIX: str(sweep.path),
                RunKey.SPREAD_THRESHOLD: sweep.spread_threshold,
                RunKey.MIN_REPEATS: sweep.min_repeats,
                RunKey.SPREAD_RULE: sweep.spread_rule,
                RunKey.MAX_REPEATS: sweep.max_repeats,
                RunKey.BOOTS: sweep.boots,  # each layout's boots in this run (--ppsweep-boots)
                # the decision rule's parameters (results/rule.rule_of reads them)
                RunKey.COMPARE: {CompareKey.ALPHA: sweep.compare_alpha,
                                 CompareKey.MIN_EFFECT_PCT: sweep.compare_min_effect_pct,
                                 CompareKey.SEQUENTIAL: sweep.compare_sequential,
                                 CompareKey.BOOT_NOISE_PCT: sweep.compare_boot_noise_pct,
                                 CompareKey.ONE_BOOT_BOUND_PCT:
                                     sweep.compare_one_boot_bound_pct},
                # [[expect]]: the failures expected (results/questions.py says "as expected")
                RunKey.EXPECT: [{ExpectKey.LAYOUT: e.layout, ExpectKey.AXES: dict(e.axes),
                                ExpectKey.FAILURE: e.failure, ExpectKey.REASON: e.reason}
                               for e in sweep.expect],
                RunKey.WORKLOAD: json.loads(json.dumps(sweep.workload.as_json())),
                RunKey.GPU_HOUR_USD: sweep.gpu_hour_usd,
                RunKey.ENGINE: sweep.engine,
                RunKey.ENGINE_VERSION: None,
                RunKey.RUN_STATUS: "running",
                RunKey.RUN_STATUS_DETAIL: None,
                RunKey.OWNER: dict(owner) if owner else None,
                # the sweep file's checkout (the run history's git version; None outside git)
                RunKey.GIT_COMMIT: git_commit(Path(sweep.path).parent),
                RunKey.ARGS: None if args is None else list(args),
                **axis_fields(sweep),
            } | {key: kept[key] for key in LEARNT_AT_BOOT if key in kept},
        )

    def read(self) -> RunJsonDict:
        raw = json.loads(self.path.read_text(encoding="utf-8"))
        return raw if isinstance(raw, dict) else {}

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into run.json (under the run folder's lock)."""
        self.store.update_json(RUN_JSON, **fields)

    def nodes(self, hosts: Iterable[str], slurm_jobs: Mapping[str, str]) -> None:
        """The pool's nodes once known, and the allocation of each cluster whose nodes come
        from one (``slurm_jobs``: cluster name → job id; its xdist workers take it there)."""
        self.update(**{RunKey.HOSTS: list(hosts), RunKey.SLURM_JOBS: dict(slurm_jobs)})

    def slurm_jobs(self) -> dict[str, str]:
        """The controller's allocation of each slurm cluster ({} before it is recorded)."""
        jobs = self.read().get(SLURM_JOBS)
        return {str(k): str(v) for k, v in jobs.items()} if isinstance(jobs, dict) else {}

    def selection(self, selected: Mapping[str, Iterable[int]], baseline_run: str = "",
                  baseline_path: str = "", baseline_chosen: str = "",
                  baseline_note: str = "") -> None:
        """The layouts and Cs the collection selected (the results layer judges those) and,
        when the baseline is not among them, the earlier run its deltas come from (its id,
        path and why it was chosen) or the note that says why there is none."""
        source = {SourceKey.RUN_ID: baseline_run, SourceKey.PATH: baseline_path,
                  SourceKey.CHOSEN: baseline_chosen}
        self.update(**{SELECTED: {cid: sorted(cs) for cid, cs in selected.items()},
                       RunKey.BASELINE_FROM: source if baseline_run else None,
                       RunKey.BASELINE_NOTE: baseline_note})

    def selected(self) -> dict[str, list[int]] | None:
        """The selection as recorded (None: not recorded: every layout of ``order`` ran)."""
        chosen = self.read().get(SELECTED)
        if not isinstance(chosen, dict):
            return None
        return {str(cid): [int(c) for c in cs or ()] for cid, cs in chosen.items()}

    def server(self, version: Any, simulated: bool, time_scale: float) -> None:
        """What a booted server says about itself (every boot; the same for every layout)."""
        self.update(**{RunKey.ENGINE_VERSION: version, RunKey.SIMULATED: simulated,
                       RunKey.TIME_SCALE: time_scale})

    def boot_history(self, found: Mapping[str, Mapping[str, float]]) -> None:
        """The boot-to-boot variance of the history's earlier runs (gate/history.boot_noise),
        kept with the run so that its answers, rebuilt later, take the same evidence."""
        self.update(**{RunKey.BOOT_HISTORY: {k: dict(v) for k, v in found.items()}})

    def adaptive(self, min_repeats: int) -> None:
        """--ppsweep-adaptive: a point whose third repeat the planner skipped has two."""
        self.update(**{RunKey.ADAPTIVE: True, RunKey.MIN_REPEATS: min_repeats})

    def run_status(self, status: str, detail: Mapping[str, Any] | None = None) -> None:
        """The run's status (``running``, then ``complete``, ``partial`` or ``interrupted``)
        and its detail (results/runstatus.RunStatus.detail: the points measured and missing,
        where it was interrupted, the resume command); None while it runs."""
        self.update(**{RunKey.RUN_STATUS: status,
                       RunKey.RUN_STATUS_DETAIL: dict(detail) if detail else None})

    def drop_skipped(self, skipped: Mapping[str, str]) -> None:
        """The layouts the adaptive sweep predicted but did not measure leave the selection."""
        chosen = self.selected()
        if chosen is not None:
            self.update(**{SELECTED: {k: v for k, v in chosen.items() if k not in skipped},
                           ADAPTIVE_SKIPPED: dict(skipped)})

    def adaptive_skipped(self) -> dict[str, str]:
        """The layouts the adaptive sweep predicted instead of measuring, with why."""
        skipped = self.read().get(ADAPTIVE_SKIPPED)
        return {str(k): str(v) for k, v in skipped.items()} if isinstance(skipped, dict) else {}


def git_commit(folder: Path) -> str | None:
    """``git describe --always --dirty`` of the checkout that holds ``folder`` (the commit,
    ``-dirty`` when it has changes); None outside a git checkout or without git."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "describe", "--always", "--dirty",
                               "--abbrev=12"], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def axis_fields(sweep: Sweep) -> dict[str, Any]:
    """run.json keys of an axis sweep, or of a sweep with layouts of several server groups
    (results/confound.py reads them): each point's layout, axis values and workload, the axes,
    the comparison baselines and the named workloads."""
    if not (sweep.axis_names or sweep.workloads or any(c.tags or c.asked_ep or c.deployed
                                                       for c in sweep.configs)):
        return {}
    named = sweep.workloads or {}
    return {
        RunKey.POINTS: point_facts(sweep.configs),
        RunKey.AXES: list(sweep.axis_names),
        RunKey.COMPARE_BASELINE: dict(sweep.compare_baseline),
        RunKey.WORKLOADS: {n: json.loads(json.dumps(w.as_json())) for n, w in named.items()},
        RunKey.CONCURRENCIES: list(dict.fromkeys(
            c for w in (named.values() or [sweep.workload]) for c in w.concurrency)),
    }
