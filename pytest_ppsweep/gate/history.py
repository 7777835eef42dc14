"""The run history: every finished run of a reports folder indexed in one SQLite file
(``reports/history.sqlite``, stdlib :mod:`sqlite3`), a cache of the run folders and never the
only copy of a result.

What a run's rows hold, each read from its folder alone (:func:`read_run`):

* ``runs``: one row per run folder: run id, start date, sweep, image, cluster, the engine's version
  (run.json ``engine_version``, or an earlier format's key: engine_facts) and the sweep's git commit
  (``git_commit``), the run's status (results/runstatus.py), the ``runs`` listing's counts (layouts,
  valid/invalid verdicts, the gate's result, the answers' line), correctness (``agree`` /
  ``disagree`` / NULL without outputs: every layout's outputs against the run's reference layout,
  results/outputs.py, and, in a gated run, against the reference run: gate.csv's ``outputs``
  rows) and accuracy (the ``[accuracy]`` task score, every layout pooled:
  results/accuracy.RunAccuracy.pooled; NULL without one); ``stamp`` is the size and mtime of the
  files the rows come from, so a reader sees a folder changed since.
* ``points``: per point (configuration × C) and gated metric (gate/comparison.METRICS, GPU
  board energy per token among them): the
  median of the valid repeats (the gate's N/N rule), their count, and the point's own interval of
  its geometric mean at the run's α (stats/decision.half_width_pct; NULL with one repeat); and,
  when they come from one boot, the mean and variance of their log values, from which
  :meth:`History.boot_noise` pools the boot-to-boot variance of the runs of one cluster, image
  and engine (each run one boot of an unchanged configuration).
* ``outputs``: per layout with outputs, whether they agree and the problems' first line.

Written at the run's close (run/close.py: a failure warns and never fails the run), repaired
by every reader (:meth:`History.sync`: a folder missing from the index or changed since is read
again, a folder gone is dropped), rebuilt from the folders by ``python -m pytest_ppsweep history
--rebuild``. Rebuilding gives the same rows as indexing at close: every column comes from the
folder, nothing from the time of indexing, and the tables are WITHOUT ROWID (stored in key
order), so two builds dump identically. Concurrency: each write is one ``BEGIN IMMEDIATE``
transaction and every connection waits up to :data:`TIMEOUT_S` for the lock, so runs closing at
once queue instead of corrupting the file.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import math
import re
import sqlite3
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import (
    ACCURACY_DIR,
    ANSWERS_JSON,
    CONFIGS_CSV,
    GATE_CSV,
    HISTORY_DB,
    OUTPUTS_DIR,
    RESULTS_CSV,
    RUN_JSON,
    RunFolder,
    RunJson,
    RunJsonDict,
    RunKey,
    RunStore,
    engine_facts,
)
from pytest_ppsweep.gate.baselines import BASELINES
from pytest_ppsweep.gate.benchjson import load, points, valid_mask
from pytest_ppsweep.gate.comparison import (
    CORRECTNESS,
    FAILING,
    METRICS,
    OUTPUTS,
    SIGNIFICANT,
    WRONG,
)
from pytest_ppsweep.results.accuracy import RunAccuracy
from pytest_ppsweep.results.aggregate import RunData, RunFolderError
from pytest_ppsweep.results.answers import one_line
from pytest_ppsweep.results.outputs import outputs_problems
from pytest_ppsweep.results.pipeline import Analysis, analyse
from pytest_ppsweep.results.rule import rule_of
from pytest_ppsweep.stats.bootnoise import BetweenRuns, RunMean, between_runs
from pytest_ppsweep.stats.decision import half_width_pct

__all__ = ["History", "HistoryError", "OutputRow", "PointRow", "RunRecord", "TrendRow",
           "gate_result", "read_run", "run_date", "run_folders"]

# 2: the gate result and correctness count the gate's outputs/accuracy rows (an index of
# version 1 is dropped and refilled from the folders, as any other cache of another schema);
# 3: points hold J/token too (METRICS energy_per_token), so an older index is refilled;
# 4: runs hold the engine's name, points their one-boot log mean and variance
SCHEMA_VERSION = 4
TIMEOUT_S = 30.0
_STAMPED = (RUN_JSON, RESULTS_CSV, CONFIGS_CSV, GATE_CSV, ANSWERS_JSON)


class HistoryError(RuntimeError):
    """The history database cannot be read or written; the message names the file."""


@dataclass(frozen=True)
class RunRecord:
    """One run folder's row of ``runs`` (``folder``: its name in the reports folder)."""
    folder: str
    run_id: str
    started: str  # ISO date (``YYYY-mm-ddTHH:MM:SS``), "" when unknown
    sweep: str
    image: str
    cluster: str
    engine: str
    engine_version: str | None
    git_commit: str | None
    simulated: int
    status: str | None
    layouts: int | None
    valid: int | None
    invalid: int | None
    gate: str
    answers: str
    correctness: str | None
    accuracy: float | None
    stamp: str

    @property
    def date(self) -> datetime | None:
        return datetime.fromisoformat(self.started) if self.started else None


@dataclass(frozen=True)
class PointRow:
    """One point × metric of a run: the median of its valid repeats and its interval."""
    folder: str
    config_id: str
    concurrency: int
    metric: str
    median: float
    low: float | None
    high: float | None
    repeats: int
    # The mean and variance of the valid repeats' log values, when they come from one boot of
    # this run (not reused from another run) and number two or more: the run's view of the
    # point as one boot of it (stats/bootnoise.py pools the between-boot variance from them).
    log_mean: float | None = None
    log_var: float | None = None
    # What the point's numbers depend on (continuity/manifest.py: image, engine, flags, env,
    # argv, workload, hosts), as a digest: the runs of one digest are boots of one configuration.
    manifest: str | None = None


@dataclass(frozen=True)
class OutputRow:
    """One layout's outputs: whether they agree with the run's reference layout."""
    folder: str
    config_id: str
    agrees: int
    problem: str


@dataclass(frozen=True)
class TrendRow:
    """One run's value of a point's metric, for ``trend``."""
    config_id: str
    concurrency: int
    started: str
    image: str
    run_id: str
    median: float
    low: float | None
    high: float | None
    repeats: int
    gate: str = ""  # the run's gate result (gate_result)
    agrees: int | None = None  # the point's layout's outputs agree (OutputRow; None: no outputs)

    @property
    def wrong(self) -> str:
        """What the run computed wrong at this point (``outputs disagree``: its layout's, or
        ``gate fail: …``: the image's), "" when nothing: ``trend`` marks the run so."""
        if self.agrees == 0:
            return "outputs disagree"
        return f"gate {self.gate}" if self.gate.startswith("fail") else ""


_TABLES = {
    "runs": (RunRecord, ("folder",)),
    "points": (PointRow, ("folder", "config_id", "concurrency", "metric")),
    "outputs": (OutputRow, ("folder", "config_id")),
}
_SQL_TYPES = {"int": "INTEGER", "float": "REAL", "str": "TEXT"}


def _ddl(name: str) -> str:
    cls, key = _TABLES[name]
    cols = []
    for f in fields(cls):
        base = str(f.type).split("|")[0].strip()
        null = "" if "None" in str(f.type) else " NOT NULL"
        cols.append(f"{f.name} {_SQL_TYPES[base]}{null}")
    return (f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(cols)}, "
            f"PRIMARY KEY ({', '.join(key)})) WITHOUT ROWID")


# -- what a run folder says ----------------------------------------------------------------------


def run_date(run_dir: Path) -> datetime | None:
    """When the run started: the ``YYYYmmdd-HHMMSS`` stamp of its id, else when its manifest
    was last written (None without one)."""
    stamp = re.search(r"(\d{8})-(\d{6})$", run_dir.name)
    if stamp:
        with contextlib.suppress(ValueError):
            return datetime.strptime("".join(stamp.groups()), "%Y%m%d%H%M%S")
    manifest = run_dir / RUN_JSON
    if not manifest.is_file():
        return None
    return datetime.fromtimestamp(manifest.stat().st_mtime).replace(microsecond=0)


def _gate_rows(run_dir: Path) -> list[dict[str, str]]:
    """gate.csv's rows ([] without one)."""
    path = run_dir / GATE_CSV
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def gate_result(run_dir: Path) -> str:
    """``pass`` or ``N regression(s)`` (regressed or broken points: what fails the gate) from
    gate.csv, ``—`` without one; an image whose outputs or task scores are wrong against the
    reference run fails whatever its speed: ``fail: outputs`` (``, accuracy``, ``, N
    regression(s)``)."""
    if not (run_dir / GATE_CSV).is_file():
        return "—"
    rows = _gate_rows(run_dir)
    verdicts = [row.get("verdict", "") for row in rows]
    wrong = [m for m in CORRECTNESS
             if any(r.get("metric") == m and r.get("verdict") == WRONG for r in rows)]
    failing = sum(verdicts.count(v) for v in FAILING if v != WRONG)
    changed = verdicts.count(SIGNIFICANT)
    note = f" ({changed} significant)" if changed else ""
    slow = f"{failing} regression{'s' if failing != 1 else ''}"
    if wrong:
        return "fail: " + ", ".join([*wrong, *([slow] if failing else [])]) + note
    return ("pass" if not failing else slow) + note


def stamp(run_dir: Path) -> str:
    """Size and mtime of the files a run's rows come from (and of its outputs/ and accuracy/): a
    folder whose stamp changed since it was indexed is read again."""
    parts = []
    outputs = [p for d in (OUTPUTS_DIR, ACCURACY_DIR) if (run_dir / d).is_dir()
               for p in sorted((run_dir / d).glob("*.json"))]
    for path in [*(run_dir / n for n in _STAMPED), *outputs]:
        try:
            st = path.stat()
        except OSError:
            parts.append(f"{path.name}:-")
            continue
        parts.append(f"{path.relative_to(run_dir)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _point_rows(run_dir: Path, raw: RunJsonDict, data: RunData | None = None,
                manifests: Mapping[str, dict[str, Any] | None] | None = None) -> list[PointRow]:
    """The ``points`` rows (``data``, ``manifests``: the folder's as read already)."""
    rule = rule_of(raw)
    out = []
    data = load(run_dir) if data is None else data
    digests: dict[str, str | None] = {}
    for (cid, conc), rows in points(data.results).items():
        valid = rows[valid_mask(rows)]
        one_boot = _one_boot(valid)
        if cid not in digests:
            digests[cid] = _digest(manifests[cid] if manifests is not None and cid in manifests
                                   else _manifest(run_dir, cid))
        for metric, (column, _, _, _) in METRICS.items():
            if column not in valid.columns:
                continue
            values = [float(v) for v in pd.to_numeric(valid[column], errors="coerce")
                      if math.isfinite(v)]
            if not values:
                continue
            median = statistics.median(values)
            low = high = None
            half = half_width_pct(values, rule)
            if math.isfinite(half):
                gmean = math.exp(statistics.fmean(math.log(v) for v in values if v > 0)) if all(
                    v > 0 for v in values) else median
                low, high = gmean / (1 + half / 100.0), gmean * (1 + half / 100.0)
            logs = [math.log(v) for v in values if v > 0]
            boot = one_boot and len(logs) == len(values) >= 2
            out.append(PointRow(run_dir.name, cid, conc, metric, median, low, high, len(values),
                                statistics.fmean(logs) if boot else None,
                                statistics.variance(logs) if boot else None, digests[cid]))
    return out


def _manifest(run_dir: Path, config_id: str) -> dict[str, Any] | None:
    try:
        return manifest.load(run_dir, config_id)
    except (OSError, ValueError):
        return None


def _digest(found: Mapping[str, Any] | None) -> str | None:
    """The digest of a layout's manifest, less what differs per run (its ``run`` block, where
    its numbers were reused from, the engine version unknown when it was written)."""
    if found is None:
        return None
    kept = {k: v for k, v in found.items() if k not in ("run", "reused_from", "engine_version")}
    text = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _one_boot(rows: pd.DataFrame) -> bool:
    """Whether a point's rounds were measured on one boot of this run (none reused from
    another run's folder, one boot number)."""
    if "reused" in rows.columns and rows["reused"].astype(str).str.lower().eq("true").any():
        return False
    if "boot" in rows.columns:
        return rows["boot"].astype(str).nunique() <= 1
    return True


def _output_rows(run_dir: Path) -> list[OutputRow]:
    """Per layout with outputs: whether they agree with the run's reference layout and, when
    the run was gated, with the reference run (gate.csv's ``outputs`` rows)."""
    folder = run_dir / OUTPUTS_DIR
    if not folder.is_dir():
        return []
    gated = {r.get("config_id", ""): r.get("message", "") for r in _gate_rows(run_dir)
             if r.get("metric") == OUTPUTS and r.get("verdict") == WRONG}
    out = []
    for path in sorted(folder.glob("*.json")):
        problems = outputs_problems(run_dir, path.stem)
        if not problems and path.stem in gated:
            problems = [gated[path.stem]]
        out.append(OutputRow(run_dir.name, path.stem, 0 if problems else 1,
                             problems[0] if problems else ""))
    return out


def read_run(run_dir: Path, analysis: Analysis | None = None
             ) -> tuple[RunRecord, list[PointRow], list[OutputRow]]:
    """A run folder's rows (RunFolderError when it has no readable run.json); ``analysis``: the
    folder's results pipeline already run (run/close.py: its run.json as read, not read
    again), else run here."""
    manifest = run_dir / RUN_JSON
    if analysis is not None and analysis[0].run_json:
        raw = analysis[0].run_json
    else:
        if not manifest.is_file():
            raise RunFolderError(f"missing file: {manifest}")
        try:
            raw = RunFolder(run_dir).read_run_json(strict=True)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RunFolderError(f"{manifest}: not valid JSON ({exc})") from exc
        if not raw:
            raise RunFolderError(f"{manifest}: expected a JSON object")
    layouts: int | None = len(raw.get(RunKey.ORDER) or ()) or None
    valid = invalid = None
    answered = ""
    pts: list[PointRow] = []
    if analysis is None:
        with contextlib.suppress(RunFolderError):  # no round yet: listed, without counts
            analysis = analyse(run_dir)
    if analysis is not None:
        _, summary, verdicts, answers = analysis
        layouts = len(summary.order)
        valid = sum(v.valid for v in verdicts)
        invalid = len(verdicts) - valid
        answered = one_line([a.as_dict() for a in answers])
    with contextlib.suppress(RunFolderError):
        pts = _point_rows(run_dir, raw, analysis[0] if analysis is not None else None,
                          analysis[1].manifests if analysis is not None else None)
    outs = _output_rows(run_dir)
    correctness = None if not outs else "agree" if all(o.agrees for o in outs) else "disagree"
    date = run_date(run_dir)
    files = analysis[0].files if analysis is not None else None
    scores = RunAccuracy.of_files(files) if files is not None else RunAccuracy.read(run_dir)
    record = RunRecord(
        folder=run_dir.name, run_id=str(raw.get(RunKey.RUN_ID) or run_dir.name),
        started=date.isoformat() if date else "", sweep=str(raw.get(RunKey.SWEEP) or ""),
        image=str(raw.get(RunKey.IMAGE) or ""), cluster=str(raw.get(RunKey.CLUSTER) or ""),
        engine=engine_facts(raw)[0], engine_version=engine_facts(raw)[1],
        git_commit=_text(raw.get(RunKey.GIT_COMMIT)),
        simulated=int(bool(raw.get(RunKey.SIMULATED))), status=_text(raw.get(RunKey.RUN_STATUS)),
        layouts=layouts, valid=valid, invalid=invalid, gate=gate_result(run_dir),
        answers=answered, correctness=correctness, accuracy=scores.pooled(),
        stamp=stamp(run_dir))
    return record, pts, outs


def run_folders(reports: Path) -> list[Path]:
    """The run folders directly in ``reports`` (not the named baselines, not hidden ones)."""
    if not reports.is_dir():
        return []
    return sorted(p for p in reports.iterdir()
                  if p.is_dir() and p.name != BASELINES and not p.name.startswith("."))


# -- the database ----------------------------------------------------------------------------------


class History:
    """The history database of one reports folder (``<reports>/history.sqlite``)."""

    def __init__(self, reports: Path, timeout_s: float = TIMEOUT_S) -> None:
        self.reports = Path(reports)
        self.path = self.reports / HISTORY_DB
        self.timeout_s = timeout_s

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            con = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise HistoryError(f"{self.path}: cannot open ({exc})") from exc
        try:
            yield con
        except sqlite3.Error as exc:
            raise HistoryError(f"{self.path}: {exc}") from exc
        finally:
            con.close()

    @staticmethod
    def _schema(con: sqlite3.Connection) -> None:
        """Inside a write transaction: the tables, made anew when an older schema is there."""
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):  # a cache: drop and refill from the folders
            for name in _TABLES:
                con.execute(f"DROP TABLE IF EXISTS {name}")
        for name in _TABLES:
            con.execute(_ddl(name))
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self.reports.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                self._schema(con)
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    @staticmethod
    def _put(con: sqlite3.Connection, rows: tuple[RunRecord, list[PointRow],
                                                  list[OutputRow]]) -> None:
        record, pts, outs = rows
        for name in _TABLES:
            con.execute(f"DELETE FROM {name} WHERE folder = ?", (record.folder,))
        for name, items in (("runs", [record]), ("points", pts), ("outputs", outs)):
            if items:
                marks = ", ".join("?" * len(fields(_TABLES[name][0])))
                con.executemany(f"INSERT INTO {name} VALUES ({marks})",
                                [astuple(i) for i in items])

    def index(self, run_dir: Path, analysis: Analysis | None = None) -> RunRecord:
        """Read ``run_dir`` (a folder of this reports folder; ``analysis``: its results
        pipeline, already run) and replace its rows."""
        rows = read_run(Path(run_dir), analysis)
        with self._write() as con:
            self._put(con, rows)
        return rows[0]

    def rebuild(self) -> tuple[int, list[str]]:
        """Every row made anew from the run folders (a file that is not a database is
        replaced); the number of runs indexed and why other folders were skipped."""
        read, skipped = [], []
        for folder in run_folders(self.reports):
            try:
                read.append(read_run(folder))
            except RunFolderError as exc:
                skipped.append(f"{folder.name}: {exc}")
        try:
            self._replace_all(read)
        except HistoryError:
            if not self.path.exists():
                raise
            self.path.unlink()  # not a database (or another schema's): the folders have it all
            self._replace_all(read)
        return len(read), skipped

    def _replace_all(self, read: Sequence[tuple[RunRecord, list[PointRow], list[OutputRow]]]
                     ) -> None:
        with self._write() as con:
            for name in _TABLES:
                con.execute(f"DELETE FROM {name}")
            for rows in read:
                self._put(con, rows)

    def sync(self, exclude: Sequence[str] = ()) -> list[str]:
        """Repair the index from the folders: a folder not indexed or changed since is read
        again, the rows of a folder gone are dropped; why folders were skipped. The folders
        named in ``exclude`` are left as they are (a run still closing)."""
        folders = {p.name: p for p in run_folders(self.reports) if p.name not in exclude}
        known = {r.folder: r.stamp for r in self.records(sync=False)} if self.path.exists() else {}
        stale = [p for name, p in folders.items() if known.get(name) != stamp(p)]
        gone = [name for name in known if name not in folders and name not in exclude]
        skipped, read = [], []
        for folder in stale:
            try:
                read.append(read_run(folder))
            except RunFolderError as exc:
                skipped.append(f"{folder.name}: {exc}")
        if read or gone or not self.path.exists():
            with self._write() as con:
                for name in gone:
                    for table in _TABLES:
                        con.execute(f"DELETE FROM {table} WHERE folder = ?", (name,))
                for rows in read:
                    self._put(con, rows)
        return skipped

    def _select(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not self.path.exists():
            return []
        with self._connect() as con:
            if con.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                return []
            return con.execute(sql, tuple(args)).fetchall()

    def records(self, *, sync: bool = True) -> list[RunRecord]:
        """Every indexed run, newest first (``sync``: repaired from the folders first)."""
        if sync:
            self.sync()
        rows = [RunRecord(*r) for r in self._select("SELECT * FROM runs")]
        return sorted(rows, key=lambda r: (r.started, r.folder), reverse=True)

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table in key order (what a rebuild must reproduce)."""
        return {name: self._select(f"SELECT * FROM {name} ORDER BY "
                                   f"{', '.join(_TABLES[name][1])}") for name in _TABLES}

    def runs_of_image(self, image: str, sweep: str | None = None) -> list[RunRecord]:
        """The runs of ``image`` (and ``sweep``), newest first, complete ones first."""
        found = [r for r in self.records() if r.image == image and (sweep is None
                                                                    or r.sweep == sweep)]
        return sorted(found, key=lambda r: (r.status in (None, "complete"), r.started, r.folder),
                      reverse=True)

    def trend(self, sweep: str, metric: str, layout: str | None = None, *,
              sync: bool = True) -> list[TrendRow]:
        """Each point's ``metric`` across the sweep's runs, oldest first per point (``sync``:
        the index repaired from the folders first)."""
        if sync:
            self.sync()
        sql = ("SELECT p.config_id, p.concurrency, r.started, r.image, r.run_id, p.median, "
               "p.low, p.high, p.repeats, r.gate, o.agrees FROM points p JOIN runs r "
               "ON r.folder = p.folder LEFT JOIN outputs o ON o.folder = p.folder AND "
               "o.config_id = p.config_id "
               "WHERE r.sweep = ? AND p.metric = ?")
        args: list[Any] = [sweep, metric]
        if layout:
            sql += " AND (p.config_id = ? OR p.config_id LIKE ?)"
            args += [layout, f"{layout}-%"]
        rows = [TrendRow(*r) for r in self._select(sql, args)]
        return sorted(rows, key=lambda t: (t.concurrency, t.config_id, t.started, t.run_id))

    def boot_noise(self, run_dir: Path, raw: RunJsonDict | None = None
                   ) -> dict[str, tuple[BetweenRuns, int]]:
        """The boot-to-boot variance that this reports folder's other runs measured, per gated
        metric (its results.csv column): the configurations of the same sweep booted once in
        each of two runs or more on ``run_dir``'s cluster, with its image, engine and engine
        version, simulated or not as it is (stats/bootnoise.py pools them); each with the number
        of runs it came from. Empty when no configuration was booted twice (``raw``:
        ``run_dir``'s run.json, read here when not given)."""
        raw = RunFolder(run_dir).read_run_json() if raw is None else raw
        engine, version = engine_facts(raw)
        self.sync(exclude=(Path(run_dir).name,))
        sql = ("SELECT p.metric, p.manifest, p.concurrency, p.folder, p.log_mean, p.log_var, "
               "p.repeats FROM points p JOIN runs r ON r.folder = p.folder "
               "WHERE r.folder != ? AND r.sweep = ? AND r.cluster = ? AND r.image = ? "
               "AND r.engine = ? AND r.engine_version IS ? AND r.simulated = ? "
               "AND p.manifest IS NOT NULL AND p.log_mean IS NOT NULL")
        args = [Path(run_dir).name, str(raw.get(RunKey.SWEEP) or ""),
                str(raw.get(RunKey.CLUSTER) or ""), str(raw.get(RunKey.IMAGE) or ""), engine,
                version, int(bool(raw.get(RunKey.SIMULATED)))]
        grouped: dict[str, dict[str, dict[int, list[RunMean]]]] = {}
        folders: dict[str, set[str]] = {}
        for metric, digest, conc, folder, mean, var, n in self._select(sql, args):
            grouped.setdefault(metric, {}).setdefault(digest, {}).setdefault(conc, []).append(
                RunMean(float(mean), float(var), int(n)))
            folders.setdefault(metric, set()).add(folder)
        out = {}
        for metric, per_digest in grouped.items():
            found = between_runs(per_digest)
            if found is not None and metric in METRICS:
                out[METRICS[metric][0]] = (found, len(folders[metric]))
        return out

    def sweeps(self) -> list[str]:
        return sorted({r[0] for r in self._select("SELECT DISTINCT sweep FROM runs")})


def index_at_close(run_dir: Path, analysis: Analysis | None = None) -> str:
    """Index a closed run in its reports folder's history (``analysis``: what the close
    computed of it); "" or the warning that says why it was not (the run and its folder are
    untouched either way: the history is a cache)."""
    try:
        History(Path(run_dir).parent).index(Path(run_dir), analysis)
    except (HistoryError, RunFolderError, OSError, ValueError, sqlite3.Error) as exc:
        return (f"warning: run not indexed in the history ({exc}); "
                "`python -m pytest_ppsweep history --rebuild` indexes it from its folder")
    return ""


def boot_noise_at_close(store: RunStore, raw: RunJsonDict | None = None
                        ) -> tuple[dict[str, dict[str, float]], str]:
    """The boot-to-boot variance the closing run's reports folder's history measured
    (:meth:`History.boot_noise`; ``raw``: the run's run.json as read already), stored in its
    run.json (``boot_history``) when there is some, before its answers are made; and "" or the
    warning that says why none was read (the history is a cache: the run goes on without)."""
    table: dict[str, dict[str, float]] = {}
    try:
        found = History(store.dir.parent).boot_noise(store.dir, raw)
        table = {column: {"var": b.var, "df": b.df, "configurations": b.configurations,
                          "runs": runs} for column, (b, runs) in found.items()}
        if table:
            RunJson(store).boot_history(table)
    except (HistoryError, RunFolderError, OSError, ValueError, sqlite3.Error) as exc:
        return {}, f"warning: the history's boot-to-boot variance not read ({exc})"
    return table, ""


def image_label(image: str) -> str:
    """How the history names an image wherever it shows one (``trend``'s table, the report's
    history charts): what tells two images of a sweep apart, its tag (``reg/sglang:v6`` →
    ``v6``), else its digest's start (``…@sha256:0123456789ab``), else its last path part;
    ``—`` for none."""
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "@" + tail.split("@", 1)[1][:19]
    if ":" in tail:
        return tail.split(":", 1)[1]
    return tail or "—"


def trend_lines(rows: Sequence[TrendRow], metric: str) -> list[str]:
    """``trend``'s table: per point, one line per run (date, image, median, interval, repeats,
    run id; ``WRONG: …`` after a run whose outputs or gate failed: its speed is no image's to
    compare). An image is named by :func:`image_label`, as the report's history charts name
    it, the whole image after the run id; the run id is never cut."""
    label, unit = METRICS[metric][1], METRICS[metric][2].strip()
    out: list[str] = []
    current: tuple[str, int] | None = None
    for r in rows:
        if (r.config_id, r.concurrency) != current:
            current = (r.config_id, r.concurrency)
            out.append(f"{r.config_id} C={r.concurrency}: {label}"
                       + (f" ({unit})" if unit else "")
                       + " — median of valid repeats [interval of the point]")
        interval = ("[1 repeat]" if r.low is None or r.high is None
                    else f"[{r.low:,.4g}, {r.high:,.4g}]")
        image = image_label(r.image)  # as the charts label it; the whole image at the end
        whole = f"  {r.image}" if r.image and r.image != image else ""
        out.append(f"  {r.started.replace('T', ' ')[:16] or '?':<16} {image:<20} "
                   f"{r.median:>10,.4g} {interval:<22} n={r.repeats} {r.run_id}{whole}"
                   + (f"  WRONG: {r.wrong}" if r.wrong else ""))
    return out
