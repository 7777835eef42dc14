"""Validity verdicts per configuration x C (seed report §6): what the answers may rank.

A measurement only counts when the service behaved: every request completed, no errors, a clean
log, the requested topology, the server saw the prompt tokens that were sent, and the repeats
agree. Each failed condition is named, so a reader knows why a number is not trusted.

With ``[sweep] spread_rule = "warn"`` (run.json ``spread_rule``) a spread above the threshold is
a warning of a VALID verdict instead of a failure; the default ``"fail"`` is strict.
:func:`point_verdict` judges one point from the run folder as it is so far (the acceptance test
``test_valid`` fails on an INVALID one, so validity gates the exit code).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pytest_ppsweep.folder.runfolder import CLAIM_LOST_JSON, CONFIGS_CSV, JUDGED_FILES
from pytest_ppsweep.results.aggregate import (
    RunData,
    Summary,
    load_run,
    round_counts,
    round_problems,
    summarize_run,
)
from pytest_ppsweep.results.objective import label, primary_metrics, workload_objectives
from pytest_ppsweep.results.replace import only_nn, replaced
from pytest_ppsweep.results.status import INTERRUPTED, PARTIAL, RUNNING
from pytest_ppsweep.stats.spread import boot_spread_pct

_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f", ""}
_MAX_FINDINGS = 160  # log findings can be long; the full text stays in configs.csv


@dataclass(frozen=True)
class Verdict:
    """Whether the numbers of one configuration at one concurrency can be trusted."""

    config_id: str
    concurrency: int
    valid: bool
    failures: tuple[str, ...] = ()
    # Conditions that would fail a strict run but were made warnings (spread_rule = "warn").
    warnings: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """``VALID``, ``VALID (warning: <w>)`` or ``INVALID: <failure>; <failure>``."""
        if not self.valid:
            return "INVALID: " + "; ".join(self.failures)
        return "VALID" + (f" (warning: {'; '.join(self.warnings)})" if self.warnings else "")


def as_bool(value: Any) -> bool | None:
    """CSV truth value: True/False/None (not recorded). Accepts bools, 0/1 and common words."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None
    return bool(value)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = " ".join(str(value).split())
    return text if len(text) <= _MAX_FINDINGS else text[: _MAX_FINDINGS - 1] + "…"


def _pct_pair(value: float, limit: float) -> str:
    # One decimal reads best; two when one decimal would print "2.0 % > 2.0 %".
    digits = 1 if f"{value:.1f}" != f"{limit:.1f}" else 2
    return f"{value:.{digits}f} % > {limit:.{digits}f} %"


def records(frame: pd.DataFrame, *keys: str) -> dict[Any, dict[str, Any]]:
    # Plain dicts keyed by config id (or id and C): simpler to type and faster than .loc.
    out: dict[Any, dict[str, Any]] = {}
    for record in frame.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        key = tuple(row[k] for k in keys)
        out[key if len(keys) > 1 else key[0]] = row
    return out


def not_run(row: dict[str, Any] | None) -> bool:
    """Whether a layout's configs.csv row (None: it has none) says it never started: no row at
    all, or the ``not run: <why>`` of a layout whose cluster left the pool
    (measure/configrow.ConfigRow.not_run)."""
    return row is None or _text(row.get("boot_error")).startswith("not run")


def _config_failures(row: dict[str, Any] | None, pending: frozenset[str] = frozenset()) -> (
        list[str]):
    # ``pending``: columns not recorded yet by design (the log scan is recorded at teardown).
    if row is None:
        return [f"no {CONFIGS_CSV} row"]
    failures = []
    checks = (("boot_ok", "boot"), ("topology_ok", "topology check"), ("log_clean", "log scan"))
    for column, what in checks:
        state = as_bool(row.get(column))
        if state is None and column in pending:
            continue
        if state is None:
            failures.append(f"{what} not recorded")
        elif not state and column == "boot_ok":
            error = _text(row.get("boot_error"))
            # a boot stopped by Ctrl-C/SIGTERM (runstatus.INTERRUPTED_BOOT) did not fail
            failures.append(error if error.startswith("interrupted")
                            else f"boot failed: {error}" if error else "boot failed")
        elif not state and column == "topology_ok":
            failures.append("topology not as requested")
        elif not state:
            findings = _text(row.get("log_findings"))
            failures.append(f"log scan: {findings}" if findings else "log scan found problems")
    return failures


def _round_failures(rounds: pd.DataFrame) -> list[str]:
    ordered = rounds.sort_values("repeat", kind="stable")
    return [f"{problem} in repeat {r['repeat']}"
            for r, problems in zip(ordered.to_dict("records"), round_problems(ordered),
                                   strict=True)
            for problem in problems]


def judge(data: RunData, summary: Summary, pending: frozenset[str] = frozenset(),
          counts: pd.Series | None = None,
          wrong: Mapping[str, str] | None = None) -> tuple[Verdict, ...]:
    """One verdict per configuration (sweep order) x concurrency of ``summary``; a point that
    was not selected in this run (run.json ``selected``) and has no rounds gets none.
    ``pending``: configs.csv checks (``log_clean``) not recorded yet that do not count. While
    the run is running (``data.meta.status``), a point not reached yet (no rounds at that C,
    no failure recorded) is pending: no verdict, and a layout's log scan, recorded at its
    teardown, does not count until it is recorded. Once an interrupted or partial run is
    closed, a point of a layout that never started (:func:`not_run`) and has no rounds was not
    run: no verdict either, never INVALID. ``counts``: which rows of the results count
    (aggregate.round_counts), when computed already. ``wrong``: per layout whose outputs or
    task score fail their check, the failure (results/correctness.failures): every point of
    the layout is INVALID with it, as after a failed boot."""
    results, meta = data.results, data.meta
    running = meta.status is not None and meta.status.status == RUNNING
    # a closed run that did not measure everything: a point it never reached is not run
    stopped = meta.status is not None and meta.status.status in (INTERRUPTED, PARTIAL)
    if running:
        pending = pending | {"log_clean"}
    configs = records(data.configs, "config_id")
    table = records(summary.table, "config_id", "concurrency")
    # Only rows that break the N/N rule need a text: select them once.
    broken = results[~(round_counts(results) if counts is None else counts)]
    broken_groups = {key: frame for key, frame in broken.groupby(["config_id", "concurrency"])}
    limit = meta.spread_threshold * 100.0
    selected = meta.selected
    primary = _primary_spreads(data)
    shared = _shared_rounds(data, configs)
    verdicts = []
    for cid in summary.order:
        base = _config_failures(configs.get(cid), pending)
        if wrong and cid in wrong:
            base.append(wrong[cid])
        for conc in summary.concurrencies:
            failures, warnings = list(base), list[str]()
            row = table.get((cid, conc))
            if row is None and selected is not None and conc not in selected.get(cid, ()):
                continue  # deselected (-k, --ppsweep-config): not in this run, not judged
            if row is None and running and (cid not in configs or not base):
                continue  # not reached yet: pending, not INVALID
            if row is None and stopped and not_run(configs.get(cid)):
                continue  # never reached (interrupted, or its cluster left): not run, not INVALID
            if row is None:
                failures.append(f"no rounds at C={conc}")
            else:
                if (cid, conc) in broken_groups:
                    group = broken_groups[(cid, conc)]
                    nn = sum(only_nn(p) for p in round_problems(group))
                    valid = int(row["repeats"]) - len(group)
                    if replaced(nn, len(group) - nn, valid, meta.min_repeats):
                        warnings.extend(f"{t} (replaced)" for t in _round_failures(group))
                    else:
                        failures.extend(_round_failures(group))
                metric, spread = primary.get((cid, conc), ("input_tps",
                                                            float(row["tps_spread_pct"])))
                if spread > limit:
                    named = "" if metric == "input_tps" else f"({label(metric)}) "
                    text = "spread " + named + _pct_pair(spread, limit)
                    (warnings if meta.spread_rule == "warn" else failures).append(text)
                if (cid, conc) in shared:
                    failures.append(shared[(cid, conc)])
                if int(row["repeats"]) < meta.min_repeats:
                    failures.append(f"{int(row['repeats'])} repeat(s) < {meta.min_repeats} "
                                    "required")
            verdicts.append(Verdict(cid, conc, not failures, tuple(failures), tuple(warnings)))
    return tuple(verdicts)


def _shared_rounds(data: RunData, configs: dict[Any, dict[str, Any]]) -> (
        dict[tuple[str, int], str]):
    """The points with a round measured since the run lost its claim on the layout's cluster
    (CLAIM_LOST_JSON; a round's raw file is written to its end, so its modification time is when
    it was last measured), each with the failure that names it."""
    try:
        lost = json.loads((data.run_dir / CLAIM_LOST_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out: dict[tuple[str, int], str] = {}
    for r in data.results.to_dict("records"):
        cid, conc, repeat = str(r["config_id"]), int(r["concurrency"]), r["repeat"]
        cluster = _text(configs.get(cid, {}).get("cluster"))
        fact = lost.get(cluster) or (next(iter(lost.values())) if len(lost) == 1 else None)
        raw = data.run_dir / "raw" / cid / f"c{conc}-r{repeat}.jsonl"
        try:
            measured = raw.stat().st_mtime
        except OSError:
            continue
        if fact is not None and measured >= float(fact["since"]):
            since = time.strftime("%H:%M:%S", time.localtime(float(fact["since"])))
            out.setdefault((cid, conc), f"the cluster was shared: {fact['why']} "
                           f"(rounds measured since {since} are not this run's alone)")
    return out


def _primary_spreads(data: RunData) -> dict[tuple[str, int], tuple[str, float]]:
    """(max − min) / median in % of each point's primary metric (its workload's objective,
    results/objective.py) per C, for points whose primary metric is not Input TPS (that one
    is the summary's ``tps_spread_pct``)."""
    raw = data.run_json
    default = workload_objectives(raw)[""][0]
    metrics = primary_metrics(raw)
    out: dict[tuple[str, int], tuple[str, float]] = {}
    results = data.results
    if results.empty or {default, *metrics.values()} == {"input_tps"}:
        return out
    for (cid, conc), part in results.groupby(["config_id", "concurrency"], sort=False):
        metric = metrics.get(str(cid), default)
        if metric == "input_tps" or metric not in part.columns:
            continue
        boots = (list(part["boot"].astype(object).fillna("").astype(str)) if "boot" in part.columns
                 else [""] * len(part))
        spread = boot_spread_pct(list(pd.to_numeric(part[metric], errors="coerce")), boots,
                                 data.meta.min_repeats)
        if not math.isnan(spread):
            out[(str(cid), int(str(conc)))] = (metric, spread)
    return out


# The files a verdict is judged from (load_run); the newest folder's judgement is kept with the
# digest of their bytes: test_valid asks once per C of a layout, with nothing written in between,
# and each judgement reads and summarizes the whole folder (pandas, ~30 ms).
_JUDGED_FILES = JUDGED_FILES
_last_judged: list[tuple[Path, bytes, tuple[Verdict, ...], tuple[str, ...]]] = []


def _folder_digest(run_dir: Path) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for name in _JUDGED_FILES:
        try:
            digest.update((run_dir / name).read_bytes())
        except FileNotFoundError:
            digest.update(b"\0missing")
        digest.update(b"\0" + name.encode())
    return digest.digest()


def _judged(run_dir: Path) -> tuple[tuple[Verdict, ...], tuple[str, ...]]:
    """Every verdict of the folder as it is now, and its sweep order (the last judgement when
    the files it read are byte for byte the same)."""
    run_dir = Path(run_dir)
    digest = _folder_digest(run_dir)
    if _last_judged and _last_judged[0][:2] == (run_dir, digest):
        return _last_judged[0][2:]
    data = load_run(run_dir)
    summary = summarize_run(data, comparisons=False)  # a verdict needs no comparisons
    verdicts = judge(data, summary, pending=frozenset({"log_clean"}))
    _last_judged[:] = [(run_dir, digest, verdicts, tuple(summary.order))]
    return verdicts, tuple(summary.order)


def point_verdict(run_dir: Path, config_id: str, concurrency: int) -> Verdict:
    """The verdict of one point from the run folder as it is now: the log scan, recorded when
    the layout is torn down, counts only once recorded (``test_logs_clean`` checks it live)."""
    verdicts, order = _judged(Path(run_dir))
    for verdict in verdicts:
        if verdict.config_id == config_id and verdict.concurrency == concurrency:
            return verdict
    if config_id not in order:
        return Verdict(config_id, concurrency, False, (f"no rounds and no {CONFIGS_CSV} row",))
    return Verdict(config_id, concurrency, False, (f"no rounds at C={concurrency}",))


