"""The run's status as its folder says it now: what ``runs``, ``show``, the
rebuilt report and the results pipeline qualify a run's answers by.

A closed run's status is run.json's (``complete``, ``partial``, ``interrupted``, with its detail,
results/runstatus.py). A run still ``running`` is read from the folder as it is now: the points
measured (every C of its selection in results.csv), what each busy layout is doing (the live
records, ``metadata/live/<pid>.json``, written by run/live.Recorded), the points not reached yet
(``pending``: no configs.csv fact, no round, not busy) and the others (their boot failed). A
run.json that says ``running`` while the process that runs it (run.json ``owner``) is known to
have ended (same host, pid gone: a ``kill -9``, a crash) is ``interrupted``, with the resume
command the owner recorded. A folder written before the run status existed has none (None).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster.claim import process_gone
from pytest_ppsweep.folder.runfolder import (
    ADAPTIVE_SKIPPED,
    SELECTED,
    RunFolder,
    RunJsonDict,
    RunKey,
    RunOwner,
)
from pytest_ppsweep.results.runstatus import (
    INTERRUPTED,
    RUNNING,
    STATUSES,
    Activity,
    RunStatus,
    measured_points,
)

__all__ = ["folder_status", "rounds_of"]


def rounds_of(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """(config id, C) of every results.csv row that names both."""
    out = []
    for row in rows:
        try:
            out.append((str(row["config_id"]), int(float(row["concurrency"]))))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _closed(word: str, detail: Mapping[str, Any]) -> RunStatus:
    at = detail.get("interrupted_at")
    resume = detail.get("resume")
    return RunStatus(word, _strings(detail.get("measured")), _strings(detail.get("missing")),
                     str(at) if at else None, str(resume) if resume else None)


def _activities(folder: RunFolder) -> list[Activity]:
    """What each busy layout does, from the live records of processes still alive."""
    out: dict[str, Activity] = {}
    for record in folder.live_records():
        try:
            pid = int(record.get("pid") or 0)
        except (TypeError, ValueError):
            pid = 0
        if process_gone(str(record.get("host") or ""), pid):
            continue  # a process of an earlier session of this folder (resumed), or killed
        for layout, entry in record["layouts"].items():
            if not isinstance(entry, dict):
                continue
            try:
                since = float(entry.get("since") or 0.0)
            except (TypeError, ValueError):
                since = 0.0
            out[str(layout)] = Activity(str(layout), str(entry.get("phase") or "?"),
                                        str(entry.get("detail") or ""), since,
                                        bool(entry.get("active", True)))
    return list(out.values())


def folder_status(run_dir: Path, raw: RunJsonDict | None = None,
                  rounds: Iterable[tuple[str, int]] | None = None,
                  now: float | None = None) -> RunStatus | None:
    """The run's status now (this module's docstring); ``raw``: run.json as read already,
    ``rounds``: (config id, C) of results.csv's rows as read already. None for a folder
    written before the run status existed."""
    folder = RunFolder(run_dir)
    raw = folder.read_run_json() if raw is None else raw
    word = raw.get(RunKey.RUN_STATUS)
    if word not in STATUSES:
        return None
    detail = raw.get(RunKey.RUN_STATUS_DETAIL)
    if word != RUNNING:
        return _closed(str(word), detail if isinstance(detail, dict) else {})
    skipped = set(raw.get(ADAPTIVE_SKIPPED) or {})  # the planner's, by design
    order = [str(c) for c in raw.get(RunKey.ORDER) or () if str(c) not in skipped]
    chosen = raw.get(SELECTED)
    wanted: dict[str, Iterable[int]] = ({str(k): v for k, v in chosen.items()}
                                        if isinstance(chosen, dict) else {c: () for c in order})
    rounds = rounds_of(folder.result_rows()) if rounds is None else rounds
    measured, missing = measured_points(order, wanted, rounds)
    owner = RunOwner.of(raw)
    host, pid = owner.host, owner.pid
    started = folder.config_rows()
    if process_gone(host, pid):
        at = next((c for c in reversed(missing) if c in started), None)
        return RunStatus(INTERRUPTED, tuple(measured), tuple(missing), at, owner.resume,
                         note=f"run.json says running, but its process {pid} on {host} has "
                              "ended without closing the run (killed?)")
    busy = _activities(folder)
    busy_ids = {a.layout for a in busy}
    # a layout still busy (its last rounds, its teardown) is not finished yet
    missing = [c for c in order if c in set(missing) | busy_ids]
    measured = [c for c in measured if c not in busy_ids]
    pending = tuple(c for c in missing if c not in busy_ids and c not in started
                    and c in wanted)
    return RunStatus(RUNNING, tuple(measured), tuple(missing), now=tuple(busy),
                     pending=pending, resume=owner.resume)
