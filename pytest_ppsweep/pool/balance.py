"""Spread the layouts of a sweep over the clusters of a pool so that they finish together.

Layouts do not take equally long: on the seeds' cluster PP1 holds it about twice as long as
PP8 (slower rounds, longer boot). Handing layouts out first come, first served leaves one
cluster idle while the other runs the last long layout; a plan made from expected durations
does not. The durations are what earlier runs of the same sweep measured: each layout's
``held_s`` in ``configs.csv`` (real seconds of boot, of the calls of the tests that use its
service, and of teardown; the waits between them are not counted). Without history
every layout counts the same and the plan is a plain round robin; the scheduler then still
lets an idle cluster take a layout another cluster has not started (see
:class:`pytest_ppsweep.pool.scheduling.PoolScheduling`).
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pytest_ppsweep.folder.runfolder import CONFIGS_CSV, PROGRESS_LOG, RunFolder, RunKey

# Beyond this many search nodes the best plan found so far is kept (it is never worse than
# longest-first greedy, which is the search's first leaf).
SEARCH_BUDGET = 200_000


@dataclass(frozen=True)
class Estimates:
    """Expected cluster time per layout and the earlier runs it came from."""

    seconds: dict[str, float]
    measured: frozenset[str] = frozenset()  # ids with a measurement (others are guesses)
    sources: tuple[str, ...] = ()  # run ids read

    def describe(self) -> str:
        if not self.measured:
            return "no earlier run of this sweep: layouts weighted equally"
        guessed = len(self.seconds) - len(self.measured)
        extra = f"; {guessed} layout(s) without history get the median" if guessed else ""
        return f"expected durations from run(s) {', '.join(self.sources)}{extra}"


def _sweep_of(run: Path) -> str | None:
    """The sweep name a run folder's metadata/run.json records (None: not a readable run)."""
    name = RunFolder(run).read_run_json().get(RunKey.SWEEP)
    return name if isinstance(name, str) else None


@dataclass(frozen=True)
class Where:
    """The cluster an estimate is for: its name and whether it runs the emulator. An earlier
    run measured elsewhere says nothing of its times (an emulator's minutes are no real
    cluster's): :func:`earlier_runs` keeps only the runs its run.json places on this cluster
    (``cluster`` names it, ``simulated`` matches; a run.json without the key does not say)."""

    cluster: str
    simulated: bool

    def holds(self, run: Path) -> bool:
        raw = RunFolder(run).read_run_json()
        names = raw.get(RunKey.CLUSTER)
        simulated = raw.get(RunKey.SIMULATED)
        if isinstance(names, str) and names and self.cluster not in names.split(","):
            return False
        return not isinstance(simulated, bool) or simulated == self.simulated


def earlier_runs(root: Path, sweep_name: str, exclude: str | None = None,
                 holding: str = CONFIGS_CSV, where: Where | None = None) -> list[Path]:
    """Earlier run folders of ``sweep_name`` in ``root`` that hold the file ``holding``, newest
    first: every folder whose run.json names the sweep, whatever its run id
    (``--ppsweep-run-id`` included); a folder without a readable run.json counts when its name
    is ``<sweep>-YYYYmmdd-HHMMSS``. ``where``: only the runs on that cluster (:class:`Where`)."""
    if not root.is_dir():
        return []
    stamp = re.compile(re.escape(sweep_name) + r"-\d{8}-\d{6}")

    def of_sweep(p: Path) -> bool:
        name = _sweep_of(p)
        return name == sweep_name if name is not None else bool(stamp.fullmatch(p.name))

    found = [p for p in root.iterdir()
             if p.name != exclude and (p / holding).is_file() and of_sweep(p)
             and (where is None or where.holds(p))]
    return sorted(found, key=lambda p: ((p / holding).stat().st_mtime, p.name), reverse=True)


_STAMP = re.compile(r"^\[ppsweep (\d\d):(\d\d):(\d\d)[\] ]")


def outside_layouts_s(run: Path) -> float | None:
    """The seconds of an earlier run spent outside every layout's cluster time (collection, the
    preflight, the waits between tests, the close): the span of its progress.log (its first
    line's local time to the file's last write) less the ``held_s`` of its layouts. None when
    the log cannot tell."""
    log = run / PROGRESS_LOG
    try:
        with log.open(encoding="utf-8", errors="replace") as fh:
            first = _STAMP.match(fh.readline())
        end = datetime.fromtimestamp(log.stat().st_mtime)
    except OSError:
        return None
    if first is None:
        return None
    h, m, sec = (int(g) for g in first.groups())
    span = (end - end.replace(hour=h, minute=m, second=sec, microsecond=0)).total_seconds()
    span %= 86400  # a run that crossed midnight
    held = sum(_held(run / CONFIGS_CSV, booted_only=False).values())
    return max(span - held, 0.0)


def _held(configs_csv: Path, booted_only: bool = True) -> dict[str, float]:
    try:
        with configs_csv.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}  # an unreadable old run only costs its history
    held = {}
    for row in rows:
        try:
            value = float(row.get("held_s") or "nan")
        except ValueError:
            continue
        # A boot that failed held the cluster briefly; it says nothing about a healthy run.
        if value > 0 and (row.get("boot_ok") == "True" or not booted_only):
            held[row["config_id"]] = value
    return held


def expected_durations(
    root: Path,
    sweep_name: str,
    ids: Sequence[str],
    exclude: str | None = None,
    skipped: Collection[str] = (),
    where: Where | None = None,
) -> Estimates:
    """Each layout's cluster time in the newest earlier run that measured it (``where``: on
    that cluster); 0 for layouts this run skips (reused from a reference or finished before a
    resume)."""
    seconds: dict[str, float] = {}
    sources: list[str] = []
    for run in earlier_runs(root, sweep_name, exclude, where=where):
        missing = [i for i in ids if i not in seconds]
        if not missing:
            break
        held = _held(run / CONFIGS_CSV)
        taken = {i: held[i] for i in missing if i in held}
        if taken:
            seconds.update(taken)
            sources.append(run.name)
    measured = frozenset(seconds)
    guess = statistics.median(seconds.values()) if seconds else 1.0
    return Estimates(
        {i: 0.0 if i in skipped else seconds.get(i, guess) for i in ids},
        measured,
        tuple(sources),
    )


@dataclass
class _Search:
    costs: list[float]
    choices: list[list[str]]  # workers each unit (longest first) may run on
    kinds: Mapping[str, Hashable]
    load: dict[str, float]
    best: float = math.inf
    best_assign: list[str] = field(default_factory=list)
    assign: list[str] = field(default_factory=list)
    nodes: int = 0

    def run(self, i: int, floor: float) -> None:
        self.nodes += 1
        if i == len(self.costs):
            span = max(self.load.values())
            if span < self.best:
                self.best, self.best_assign = span, list(self.assign)
            return
        tried: set[tuple[Hashable, float]] = set()
        for worker in sorted(self.choices[i], key=lambda w: self.load[w]):
            # Two workers of the same kind with the same load are interchangeable.
            key = (self.kinds[worker], self.load[worker])
            if key in tried or self.load[worker] + self.costs[i] >= self.best:
                continue
            tried.add(key)
            self.load[worker] += self.costs[i]
            self.assign.append(worker)
            self.run(i + 1, floor)
            self.assign.pop()
            self.load[worker] -= self.costs[i]
            if self.best <= floor * (1 + 1e-9) or self.nodes > SEARCH_BUDGET:
                return


def partition(
    costs: Mapping[str, float],
    workers: Mapping[str, Hashable],
    fits: Callable[[str, Hashable], bool],
) -> dict[str, list[str]]:
    """Units → workers, with the smallest makespan found; each worker's list longest first.

    ``workers`` maps a worker to its kind (workers of one kind can run the same units);
    ``fits(unit, kind)`` says whether a unit can run on a worker of that kind. Units that fit
    no worker are left out. Exact for sweeps of ordinary size (branch and bound from
    longest-first greedy); the best plan found within :data:`SEARCH_BUDGET` otherwise.
    """
    units = sorted(  # stable: equal costs keep the order given (the sweep's)
        (u for u in costs if any(fits(u, k) for k in workers.values())),
        key=lambda u: -costs[u],
    )
    plan: dict[str, list[str]] = {w: [] for w in workers}
    if not units:
        return plan
    search = _Search(
        costs=[max(costs[u], 0.0) for u in units],
        choices=[[w for w, k in workers.items() if fits(u, k)] for u in units],
        kinds=workers,
        load=dict.fromkeys(workers, 0.0),
    )
    floor = max(sum(search.costs) / len(workers), max(search.costs))
    search.run(0, floor)
    for unit, worker in zip(units, search.best_assign, strict=True):
        plan[worker].append(unit)
    return plan
