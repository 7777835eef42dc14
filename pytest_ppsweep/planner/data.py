"""What the planner fits to: measured points (layout x C medians) and layout facts (boot time,
worst-rank memory), read from run folders or from a points file (CSV, e.g. the seeds' table).

Only valid rounds count (N/N completed, no failed request). Runs of different models or images,
or with different input/output lengths per C, are not mixed: :class:`PlannerError` names them.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import (
    COMM_CSV,
    RESULTS_CSV,
    RunKey,
    engine_facts,
    server_info_candidates,
)

__all__ = ["CommPoint", "Measured", "Observation", "PlannerError", "load_measured",
           "read_comm_csv", "read_points_file"]


class PlannerError(ValueError):
    """Bad planner input; the message names the file, the key, what was expected and found."""


@dataclass(frozen=True)
class Observation:
    """Medians of one measured point."""

    config_id: str
    pp: int
    tp: int
    ep: int
    concurrency: int
    input_len: int
    num_requests: int
    input_tps: float
    ttft_p50_s: float
    ttft_p95_s: float
    repeats: int
    spread: float  # (max - min) / median of Input TPS over the repeats
    source: str


@dataclass(frozen=True)
class LayoutFacts:
    """Per-layout facts: boot time, worst-rank memory, decode graph, micro-batch cap."""

    config_id: str
    pp: int
    tp: int
    ep: int
    boot_s: float | None
    mem_peak_mib: float | None
    mem_total_mib: float | None
    decode_graph: bool
    micro: int


@dataclass(frozen=True)
class CommPoint:
    """One all-reduce measurement of the run's communication benchmark (``comm.csv``, test_comm):
    a TP domain of ``tp`` GPUs, one message size."""

    tp: int
    size_bytes: int
    time_us: float
    busbw_gbs: float
    source: str


@dataclass(frozen=True)
class Measured:
    """Everything the fit reads, with where it came from."""

    points: tuple[Observation, ...]
    layouts: tuple[LayoutFacts, ...]
    model: str
    image: str
    sources: tuple[str, ...]
    output_len: int = 1
    chunk: int = 8192
    comm: tuple[CommPoint, ...] = ()  # the runs' test_comm all-reduce results, where they exist

    def layout_ids(self) -> list[str]:
        return sorted({o.config_id for o in self.points})


POINT_COLUMNS = ("config_id", "pp", "tp", "ep", "concurrency", "input_len", "num_requests",
                 "input_tps", "ttft_p50_s", "ttft_p95_s")


def _num(path: Path, row: int, key: str, raw: Any, kind: type = float) -> Any:
    try:
        value = kind(float(raw)) if kind is int else kind(raw)
    except (TypeError, ValueError):
        raise PlannerError(f"{path}: row {row}: key {key!r}: expected a number, found {raw!r}") \
            from None
    if isinstance(value, float) and not math.isfinite(value):
        raise PlannerError(f"{path}: row {row}: key {key!r}: expected a finite number, "
                           f"found {raw!r}")
    return value


def read_points_file(path: Path) -> Measured:
    """A points CSV (one row per layout x C of medians; ``#`` lines are comments naming the
    source). Columns: see :data:`POINT_COLUMNS`; optional ``repeats``, ``spread``, ``boot_s``,
    ``mem_peak_mib``, ``mem_total_mib``, ``decode_graph``, ``model``, ``image``, ``source``."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    missing = [c for c in POINT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        found = ", ".join(reader.fieldnames or [])
        raise PlannerError(f"{path}: missing column(s) {', '.join(missing)}; expected "
                           f"{', '.join(POINT_COLUMNS)}, found {found}")
    points: list[Observation] = []
    facts: dict[str, LayoutFacts] = {}
    models, images = set(), set()
    for i, row in enumerate(reader, start=2):
        cid = row["config_id"]
        pp, tp, ep = (_num(path, i, k, row[k], int) for k in ("pp", "tp", "ep"))
        obs = Observation(
            cid, pp, tp, ep, _num(path, i, "concurrency", row["concurrency"], int),
            _num(path, i, "input_len", row["input_len"], int),
            _num(path, i, "num_requests", row["num_requests"], int),
            _num(path, i, "input_tps", row["input_tps"]),
            _num(path, i, "ttft_p50_s", row["ttft_p50_s"]),
            _num(path, i, "ttft_p95_s", row["ttft_p95_s"]),
            repeats=_num(path, i, "repeats", row.get("repeats") or 3, int),
            spread=_num(path, i, "spread", row.get("spread") or 0.0),
            source=row.get("source") or str(path),
        )
        for key in ("input_tps", "ttft_p50_s", "ttft_p95_s"):
            if getattr(obs, key) <= 0:
                raise PlannerError(f"{path}: row {i}: key {key!r}: expected > 0, found "
                                   f"{getattr(obs, key)}")
        points.append(obs)
        models.add(row.get("model") or "")
        images.add(row.get("image") or "")
        opt = {k: (None if not row.get(k) else _num(path, i, k, row[k]))
               for k in ("boot_s", "mem_peak_mib", "mem_total_mib")}
        facts[cid] = LayoutFacts(cid, pp, tp, ep, opt["boot_s"], opt["mem_peak_mib"],
                                 opt["mem_total_mib"],
                                 (row.get("decode_graph") or "true").lower() != "false", 0)
    _one(path, "model", models)
    _one(path, "image", images)
    if not points:
        raise PlannerError(f"{path}: no valid point: expected at least one row, found none")
    return Measured(tuple(points), tuple(facts.values()), next(iter(models)), next(iter(images)),
                    (str(path),))


def _one(where: Any, key: str, values: set[str]) -> None:
    if len(values) > 1:
        raise PlannerError(f"{where}: key {key!r}: expected one {key} for every point, found "
                           f"{', '.join(sorted(repr(v) for v in values))}")


def _server_of(run_dir: Path, config_id: str) -> dict[str, Any]:
    """The resolved server info of a layout (metadata/), where the run wrote one."""
    for name in server_info_candidates(config_id):
        path = run_dir / name
        if path.is_file():
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                return {}
            return raw if isinstance(raw, dict) else {}
    return {}


def read_comm_csv(path: Path) -> tuple[CommPoint, ...]:
    """The all-reduce rows of a run's ``comm.csv`` (test_comm) whose sums were right; () when the
    run has none. A row that is not numbers is an error naming the file, row and key."""
    if not path.is_file():
        return ()
    out: list[CommPoint] = []
    with path.open(encoding="utf-8", newline="") as fh:
        for i, row in enumerate(csv.DictReader(fh), start=2):
            if str(row.get("wrong") or "0") not in ("0", "0.0", "False", "false"):
                continue  # a wrong sum measures nothing
            out.append(CommPoint(
                _num(path, i, "tp", row.get("tp"), int),
                _num(path, i, "size_bytes", row.get("size_bytes"), int),
                _num(path, i, "time_us", row.get("time_us")),
                _num(path, i, "busbw_gbs", row.get("busbw_gbs")), str(path)))
    return tuple(p for p in out if p.tp > 1 and p.time_us > 0 and p.busbw_gbs > 0)


def load_run_folder(run_dir: Path) -> Measured:
    """The valid medians and layout facts of one run folder."""
    from pytest_ppsweep.results.aggregate import load_run

    data = load_run(run_dir)
    raw = data.run_json
    given = raw.get(RunKey.WORKLOAD)
    workload: dict[str, Any] = given if isinstance(given, dict) else {}
    output_len = int(workload.get("output_len") or 1)
    res = data.results
    ok = res[(res["completed"] == res["num_requests"]) & (res["failed"] == 0)
             & (res["input_tps"] > 0)]
    points: list[Observation] = []
    for (cid, conc), grp in ok.groupby(["config_id", "concurrency"], sort=True):
        first = grp.iloc[0]
        tps = grp["input_tps"].astype(float)
        med = float(tps.median())
        nominal = float(first["input_tokens_nominal"]) / max(int(first["num_requests"]), 1)
        points.append(Observation(
            str(cid), int(first["pp"]), int(first["tp"]), int(first["ep"]), int(str(conc)),
            round(nominal), int(first["num_requests"]), med,
            float(grp["ttft_p50_s"].astype(float).median()),
            float(grp["ttft_p95_s"].astype(float).median()), len(grp),
            float((tps.max() - tps.min()) / med) if med > 0 else 0.0, str(run_dir)))
    if not points:
        raise PlannerError(f"{run_dir}/{RESULTS_CSV}: no valid point: expected at least one round "
                           f"with every request completed and none failed, found "
                           f"{len(res)} round(s), none valid")
    facts: list[LayoutFacts] = []
    chunks: list[int] = []  # each booted layout's prefill chunk, as its server says
    knobs = engine_of(engine_facts(raw)[0]).knobs
    cfg = data.configs
    for _, row in cfg.iterrows():
        cid = str(row["config_id"])
        server = _server_of(run_dir, cid)
        with contextlib.suppress(TypeError, ValueError):
            if server.get(knobs.chunk) is not None:
                chunks.append(int(server[knobs.chunk]))
        boot_ok = str(row.get("boot_ok")).lower() in ("true", "1", "1.0")

        def val(key: str, row: Any = row) -> float | None:
            v = row.get(key)
            return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

        micro = val("pp_max_micro_batch_size")
        facts.append(LayoutFacts(
            cid, int(row["pp"]), int(row["tp"]), int(row["ep"]),
            val("boot_s") if boot_ok else None, val("mem_peak_mib"), val("mem_total_mib"),
            not bool(server.get(knobs.decode_graph_off, False)), int(micro or 0)))
    # the chunk the layouts ran with (the most common, when a sweep varies it), else 8192 (the
    # seeds' chunk) when no server said; run.json has no such key: read there, it always was
    chunk = Counter(chunks).most_common(1)[0][0] if chunks else 8192
    return Measured(tuple(points), tuple(facts), str(raw.get(RunKey.MODEL_PATH) or ""),
                    str(raw.get(RunKey.IMAGE) or ""), (str(run_dir),), output_len, chunk,
                    read_comm_csv(run_dir / COMM_CSV))


def load_measured(paths: list[Path]) -> Measured:
    """Run folders and/or points files, merged; they must share the model and the image."""
    if not paths:
        raise PlannerError("no run given: expected at least one run folder or points file")
    parts: list[Measured] = []
    for path in paths:
        if path.is_dir():
            parts.append(load_run_folder(path))
        elif path.is_file():
            parts.append(read_points_file(path))
        else:
            raise PlannerError(f"{path}: expected a run folder or a points file, found nothing")
    for key in ("model", "image"):
        found = {getattr(p, key) for p in parts}
        if len(found) > 1:
            detail = "; ".join(f"{p.sources[0]}: {getattr(p, key)!r}" for p in parts)
            raise PlannerError(f"runs of different {key}s cannot be fitted together: key "
                               f"{key!r}: expected one value, found {detail}")
    for p in parts:
        if p.output_len != 1:
            raise PlannerError(f"{p.sources[0]}: key 'workload.output_len': expected 1 (the "
                               f"planner models prefill rounds), found {p.output_len}")
    layouts: dict[str, LayoutFacts] = {}
    for p in parts:
        for f in p.layouts:
            layouts.setdefault(f.config_id, f)
    return Measured(tuple(o for p in parts for o in p.points), tuple(layouts.values()),
                    parts[0].model, parts[0].image, tuple(s for p in parts for s in p.sources),
                    1, parts[0].chunk, tuple(c for p in parts for c in p.comm))
