"""The run's status, always true, and the answers qualified by it.

A run is ``running`` while it measures, then ``complete`` (every point of the sweep measured at
every C of its selection), ``partial`` (points deselected, failed or not run) or ``interrupted``
(Ctrl-C, SIGTERM or SIGHUP ended the session). The session's state machine
(session/runstate.py) says which; this module holds the rules that are plain data: which points
count as measured, the resume command (built by results/commands.py), and :func:`qualify`: an
interrupted, partial or running run never says ``decided`` about the whole question. The status
itself (its words, its detail for run.json, its terminal lines) is results/status.py's,
re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from pytest_ppsweep.folder.runfolder import CONFIGS_CSV
from pytest_ppsweep.results.answers import AS_EXPECTED, CLAIMS, Answer
from pytest_ppsweep.results.commands import resume_command  # re-exported: its one rule
from pytest_ppsweep.results.status import (  # re-exported: the one vocabulary
    COMPLETE,
    INTERRUPTED,
    INTERRUPTED_BOOT,
    PARTIAL,
    RUNNING,
    STATUSES,
    Activity,
    RunStatus,
)

__all__ = ["COMPLETE", "INTERRUPTED", "INTERRUPTED_BOOT", "PARTIAL", "RUNNING", "STATUSES",
           "Activity", "RunStatus", "measured_points", "qualify", "resume_command"]


def measured_points(order: Sequence[str], wanted: Mapping[str, Iterable[int]],
                    rounds: Iterable[tuple[str, int]]) -> tuple[list[str], list[str]]:
    """The points of ``order`` measured and missing: a point is measured when ``rounds``
    ((config id, C) of every round recorded) holds one at each C ``wanted`` for it (any C when
    its selection names none); a point not in ``wanted`` (deselected) is missing."""
    seen: dict[str, set[int]] = {}
    for cid, conc in rounds:
        seen.setdefault(cid, set()).add(conc)
    measured: list[str] = []
    missing: list[str] = []
    for cid in order:
        want = set(wanted[cid]) if cid in wanted else None
        got = seen.get(cid, set())
        ok = want is not None and bool(got) and want <= got
        (measured if ok else missing).append(cid)
    return measured, missing


def _names(points: Sequence[str]) -> str:
    if len(points) <= 1:
        return "".join(points)
    return ", ".join(points[:-1]) + f" and {points[-1]}"


def _scope(a: Answer, status: RunStatus) -> tuple[list[str], list[str]]:
    """The points ``a`` was asked about that the run measured and missed (run order): its
    own (extra ``points``, results/questions.py) when it names them, else the run's."""
    points = a.extra.get("points")
    if not isinstance(points, list | tuple) or not points:
        return list(status.measured), list(status.missing)
    mine = {str(p) for p in points}
    return ([p for p in status.measured if p in mine],
            [p for p in status.missing if p in mine])


def _missing_text(missing: Sequence[str], excluded: Mapping[str, str]) -> str:
    """``pp2 and pp16 not run; pp4 failed; pp4-…-a2a_deepep OOM, as expected``: why each
    missing point is missing (a failed one is excluded with its reason, the rest did not
    run)."""
    expected = [p for p in missing if AS_EXPECTED in excluded.get(p, "")]
    failed = [p for p in missing if p in excluded and p not in expected]
    not_run = [p for p in missing if p not in excluded]
    parts = [f"{_names(not_run)} not run"] if not_run else []
    if failed:
        parts.append(f"{_names(failed)} failed")
    parts += [f"{p} {excluded[p].split(AS_EXPECTED)[0]}{AS_EXPECTED}" for p in expected]
    return "; ".join(parts)


def qualify(answers: Sequence[Answer], status: RunStatus) -> list[Answer]:
    """The answers as an interrupted, partial or running run may give them: an interrupted
    run's every answer says ``interrupted`` (with what was measured and that nothing else was
    compared), a partial run's decided answers say ``partial`` and name the points not run, a
    running run's every answer says ``running`` (what leads so far, among which points, and
    which are not measured yet); a complete run's answers are returned as they are.

    Each answer counts the points of its own question (extra ``points``): a partial run's
    answer whose points were all measured, or whose only missing points failed as the
    sweep expected, stands as it is; one computed on a part of its points names the rest
    (deselected or not reached: ``not run``; excluded: ``failed``)."""
    if status.status not in (INTERRUPTED, PARTIAL, RUNNING):
        return list(answers)
    m, n = len(status.measured), status.total
    out = []
    for a in answers:
        if status.status == RUNNING:
            out.append(_running(a, status))
            continue
        q_measured, q_missing = _scope(a, status)
        excluded = dict(a.excluded)
        if status.status == PARTIAL:
            unexpected = [p for p in q_missing if AS_EXPECTED not in excluded.get(p, "")]
            if not unexpected:
                out.append(a)  # every point it asks about measured, or failed as expected
                continue
            if a.status not in CLAIMS:
                # it claims nothing about the whole question; it says which points it lacks
                # (an excluded one is named with its reason already)
                not_run = [p for p in q_missing if p not in excluded]
                unit = "layouts" if a.kind == "layout" else "points"
                out.append(replace(a, caveats=(*a.caveats, (
                    f"among {len(q_measured)} of {len(q_measured) + len(q_missing)} {unit} "
                    f"only: {_names(not_run)} not run."),)) if not_run else a)
                continue
        measured = ", ".join(q_measured) or "none"
        missing = _missing_text(q_missing, excluded)
        k, unit = len(q_measured), "layouts" if a.kind == "layout" else "points"
        if k < 2:
            text = f"{measured} measured; nothing compared"
        elif a.status in CLAIMS:
            text = f"{a.answer} leads among {measured}" + (f"; {missing}" if missing else "")
        else:
            text = f"{a.status} among {measured}" + (f"; {missing}" if missing else "")
        if status.status == INTERRUPTED:
            text = f"interrupted after {m} of {n} layouts: {text}"
        elif a.status in CLAIMS and k >= 2:
            text = (f"{a.status} among {k} of {k + len(q_missing)} {unit}: {a.answer}; "
                    f"{missing}")
        else:
            text = f"{k} of {k + len(q_missing)} {unit}: {text}"
        own = str(a.extra.get("text", "")).strip()
        extra = {**a.extra, "text": text + "." + (f" {own}" if own else ""),
                 "run_status": status.status, "status_before": a.status,
                 "leader": a.answer}
        out.append(replace(a, status=status.status, answer=None, fallback=None, extra=extra))
    return out


def _running(a: Answer, status: RunStatus) -> Answer:
    """An answer of a run still measuring: provisional, what leads so far and among which
    points; the points not reached yet are not measured yet, not excluded."""
    m, n = len(status.measured), status.total
    q_measured, q_missing = _scope(a, status)
    measured = ", ".join(q_measured) or "none"
    rest = f"; {_names(q_missing)} not measured yet" if q_missing else ""
    if not q_measured:
        text = "nothing measured yet" if not m else "none of its points measured yet"
    elif len(q_measured) < 2:
        text = f"{measured} measured; nothing compared yet{rest}"
    elif a.status in CLAIMS:
        text = f"{a.answer} leads so far among {measured}{rest}"
    else:
        text = f"{a.status} so far among {measured}{rest}"
    text = f"{m} of {n} layouts measured so far: {text}."
    waiting = set(status.missing)
    own = str(a.extra.get("text", "")).strip()
    extra = {**a.extra, "text": text + (f" {own}" if own else ""), "run_status": RUNNING,
             "status_before": a.status, "leader": a.answer}
    excluded = tuple((p, w) for p, w in a.excluded if p not in waiting or not w.startswith(
        (f"no {CONFIGS_CSV} row", "no rounds")))
    return replace(a, status=RUNNING, answer=None, fallback=None, excluded=excluded,
                   rerun=None, extra=extra)
