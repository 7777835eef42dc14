"""Bisection: the first image of an ordered list that regressed, found with the gate's own
measurement and comparison (gate/comparison.py; its noise rule, stats/gatenoise.py).

``python -m pytest_ppsweep bisect --good G --bad B --images LIST --sweep FOLDER``:

1. The runs of G and B come from the history (gate/history.py: the newest run of the image in
   the sweep that measured the points), else they are measured.
2. The points that regressed are the gate's ``regression`` rows of B against G (configuration
   × C × metric), and its ``wrong`` rows (a layout whose outputs or task score fail against G:
   C 0, every C of the layout); with none there is nothing to bisect (exit 1, the gate's table
   says why).
3. The images between G and B are searched by halving: an image is measured (a gate run of the
   sweep with ``--ppsweep-image`` and ``--ppsweep-compare <G's run>``, only the regressed
   layouts: ``--ppsweep-config``) unless the history has a run of it with those points, then
   judged on the regressed points alone: *bad* when one of them is a gate regression against
   G, *good* otherwise. Only the regressed points run: their layouts (``--ppsweep-config``) at
   their concurrencies (``--ppsweep-concurrency``; the union over the layouts, as one pytest
   run selects Cs for all its layouts alike). An image whose layouts do not boot (every
   regressed point ``broken``: did not boot) is reported and skipped, as is one whose rounds
   are broken, and the search takes the nearest untried image of the range instead.
4. The result is the first bad image with its evidence at the gate's significance: its gate rows
   against G, and against the last good image before it. Unbootable images between the last
   good and the first bad leave the answer as a range, said so.

The search (:func:`search`) takes its measurement as a function, so it is tested without
booting anything; :class:`GateRunner` is the measurement of the command line.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_ppsweep.gate.benchjson import load, points, valid_mask
from pytest_ppsweep.gate.comparison import INCONCLUSIVE, WRONG, Comparison, Threshold, compare
from pytest_ppsweep.gate.history import History, HistoryError
from pytest_ppsweep.results.commands import gate_command

GOOD, BAD, NO_BOOT, BROKEN = "good", "bad", "does not boot", "broken"
# Worse than the threshold by the medians but within the noise: neither good nor bad, skipped
# like an image that does not boot (judging it good would move the search past a regression).
UNCLEAR = "not told from noise"
Point = tuple[str, int, str]  # (configuration, C, metric) of a gate row
# The gate rows that make an image bad: slower beyond noise and threshold, or computing wrong
# outputs or task answers against the good image (a correctness row: its layout, C 0).
REGRESSED = ("regression", WRONG)
Wanted = Sequence[tuple[str, int]]  # the (configuration, C) points an image's run must measure
RunOf = Callable[[str, Wanted | None], tuple[Path | None, bool, str]]


class BisectError(ValueError):
    """The bisection cannot start or go on (the message says which image and why)."""


@dataclass(frozen=True)
class Judged:
    """One image judged on the regressed points against the good image's run."""
    image: str
    state: str  # GOOD, BAD, NO_BOOT, BROKEN, UNCLEAR
    run_dir: Path | None
    rows: tuple[Comparison, ...]
    reused: bool  # from the history, not measured now
    why: str = ""


@dataclass
class Outcome:
    """What the bisection found."""
    first_bad: str | None
    last_good: str
    judged: list[Judged] = field(default_factory=list)
    measured: int = 0  # gate runs made by this bisection
    regressed: tuple[Point, ...] = ()
    evidence: tuple[Comparison, ...] = ()  # first bad vs the last good image
    undecided: tuple[str, ...] = ()  # skipped images between last good and first bad

    def lines(self) -> list[str]:
        out = [f"regressed between the good and the bad image: "
               f"{', '.join(f'{c} C={n} {m}' for c, n, m in self.regressed)}"]
        for j in self.judged:
            where = "history" if j.reused else "measured"
            run = j.run_dir.name if j.run_dir else "no run folder"
            out.append(f"  {j.image}: {j.state} ({where}: {run})" + (f" — {j.why}" if j.why
                                                                        else ""))
        out.append(f"gate runs made: {self.measured}")
        if self.first_bad is None:
            out.append("no first bad image found")
            return out
        if self.undecided:
            out.append(f"first bad image: {self.first_bad}, or one of "
                       f"{', '.join(self.undecided)} before it (they do not boot, or their "
                       "change is not told from noise)")
        else:
            out.append(f"first bad image: {self.first_bad} (last good: {self.last_good})")
        first = next(j for j in self.judged if j.image == self.first_bad)
        out.append("evidence against the good image (the gate's rule):")
        out += [f"  {r.verdict.upper()} {r.message}" for r in first.rows]
        out.append(f"evidence against the last good image {self.last_good}:")
        out += [f"  {r.verdict.upper()} {r.message}" for r in self.evidence]
        if not any(r.verdict in REGRESSED for r in self.evidence):
            out.append("  (not beyond the noise against the last good image alone: each image "
                       "is judged against the good image, as the gate judges it)")
        return out


def regressed_points(rows: Sequence[Comparison]) -> tuple[Point, ...]:
    """The (configuration, C, metric) of the gate's regression rows and of its correctness
    rows that fail (outputs or task score wrong: C 0, the whole layout)."""
    return tuple((r.config_id, r.concurrency, r.metric) for r in rows
                 if r.verdict in REGRESSED)


def judge(image: str, run_dir: Path | None, good_run: Path, regressed: Sequence[Point],
          thresholds: Mapping[str, Threshold] | None, reused: bool,
          why: str = "") -> Judged:
    """An image's state from its run against the good image's, on the regressed points only."""
    if run_dir is None:
        return Judged(image, BROKEN, None, (), reused, why or "no run folder")
    layouts = {c for c, _, _ in regressed}
    wanted = set(regressed)
    rows = [r for r in compare(run_dir, good_run, thresholds) if r.config_id in layouts]
    mine = tuple(r for r in rows if (r.config_id, r.concurrency, r.metric) in wanted
                 or (not r.metric and any((r.config_id, r.concurrency) == (c, n)
                                          or (r.config_id == c and not r.concurrency)
                                          for c, n, _ in regressed)))
    broken = [r for r in mine if r.verdict == "broken"]
    if broken and len(broken) == len(mine):
        state = NO_BOOT if all("did not boot" in r.message for r in broken) else BROKEN
        return Judged(image, state, run_dir, mine, reused, broken[0].message)
    if any(r.verdict in REGRESSED for r in mine):
        return Judged(image, BAD, run_dir, mine, reused, why)
    unclear = [r for r in mine if r.verdict == INCONCLUSIVE]
    if unclear:
        return Judged(image, UNCLEAR, run_dir, mine, reused, unclear[0].message)
    return Judged(image, GOOD, run_dir, mine, reused, why)


def search(images: Sequence[str], good: str, bad: str,
           run_of: RunOf,
           thresholds: Mapping[str, Threshold] | None = None) -> Outcome:
    """Bisect ``images`` (ordered, oldest first) between ``good`` and ``bad``. ``run_of(image,
    wanted)`` gives an image's run folder (None: no folder, with the why), whether it came
    from the history, and a note; ``wanted`` the regressed (configuration, C) points, None for
    the good and bad images' own runs (every point)."""
    if len(set(images)) != len(images):
        dup = next(i for i in images if list(images).count(i) > 1)
        raise BisectError(f"--images: {dup} is listed twice")
    for name, image in (("--good", good), ("--bad", bad)):
        if image not in images:
            raise BisectError(f"{name} {image}: not in --images ({', '.join(images)})")
    lo, hi = images.index(good), images.index(bad)
    if lo >= hi:
        raise BisectError(f"--good {good} must come before --bad {bad} in --images")
    measured = 0

    def run(image: str, wanted: Wanted | None) -> tuple[Path | None, bool, str]:
        nonlocal measured
        folder, reused, note = run_of(image, wanted)
        measured += 0 if reused else 1
        return folder, reused, note

    good_run, good_reused, note = run(good, None)
    if good_run is None:
        raise BisectError(f"--good {good}: no run of it could be measured ({note})")
    bad_run, bad_reused, note = run(bad, None)
    if bad_run is None:
        raise BisectError(f"--bad {bad}: no run of it could be measured ({note})")
    regressed = regressed_points(compare(bad_run, good_run, thresholds))
    outcome = Outcome(None, good, measured=measured, regressed=regressed)
    outcome.judged.append(Judged(good, GOOD, good_run, (), good_reused))
    if not regressed:
        outcome.judged.append(Judged(bad, GOOD, bad_run, (), bad_reused,
                                     "no gate regression against the good image"))
        outcome.measured = measured
        return outcome
    outcome.judged.append(judge(bad, bad_run, good_run, regressed, thresholds, bad_reused))
    wanted = list(dict.fromkeys((c, n) for c, n, _ in regressed))
    runs = {good: good_run, bad: bad_run}
    skipped: set[int] = set()
    while True:
        left = [i for i in range(lo + 1, hi) if i not in skipped]
        if not left:
            break
        middle = (lo + hi) / 2
        mid = min(left, key=lambda i: (abs(i - middle), i))
        folder, reused, note = run(images[mid], wanted)
        judged = judge(images[mid], folder, good_run, regressed, thresholds, reused, note)
        outcome.judged.append(judged)
        if judged.state == BAD:
            hi = mid
        elif judged.state == GOOD:
            lo = mid
        else:
            skipped.add(mid)
        if folder is not None:
            runs[images[mid]] = folder
    outcome.first_bad, outcome.last_good = images[hi], images[lo]
    outcome.undecided = tuple(images[i] for i in range(lo + 1, hi))
    outcome.evidence = tuple(
        r for r in compare(runs[images[hi]], runs[images[lo]], thresholds)
        if (r.config_id, r.concurrency, r.metric) in set(regressed))
    outcome.measured = measured
    return outcome


def read_images(value: str) -> list[str]:
    """``--images``: a file with one image per line (``#`` comments, blank lines ignored) or a
    comma-separated list."""
    path = Path(value)
    if path.is_file():
        lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
        images = [ln for ln in lines if ln]
        if not images:
            raise BisectError(f"--images {value}: the file lists no image")
        return images
    if "," not in value and ("/" in value and not re.search(r"[:@]", value)):
        raise BisectError(f"--images {value}: no such file (a list is comma-separated)")
    return [i.strip() for i in value.split(",") if i.strip()]


@dataclass
class GateRunner:
    """The gate's measurement of one image: the sweep run by pytest with ``--ppsweep-image``
    in the reports folder (its run then indexed in the history), or a run of the history."""
    sweep_dir: Path
    reports: Path
    sweep: str
    thresholds: Sequence[str] = ()
    pytest_args: Sequence[str] = ()
    timeout_s: float = 3600.0
    good_run: Path | None = None
    log: Callable[[str], None] = print

    def __post_init__(self) -> None:
        # pytest runs in the sweep folder: a path given relative to here must not be read
        # relative to there
        self.sweep_dir = Path(self.sweep_dir).absolute()
        self.reports = Path(self.reports).absolute()

    def reusable(self, image: str, wanted: Wanted | None) -> Path | None:
        """The newest run of ``image`` in the history that measured every point asked (a point
        without a C: its layout)."""
        try:
            found = History(self.reports).runs_of_image(image, self.sweep)
        except HistoryError:
            return None
        for record in found:
            if record.status not in (None, "complete", "partial"):
                continue
            folder = self.reports / record.folder
            if wanted is None or _measures(folder, wanted):
                return folder
        return None

    def _clusters(self) -> str:
        """The clusters of the good image's run, where every gate run measures ("" before
        it is known: the sweep's own, or the user's ``--ppsweep-cluster``)."""
        return _clusters_of(self.good_run) if self.good_run is not None else ""

    def __call__(self, image: str, wanted: Wanted | None) -> tuple[Path | None, bool, str]:
        folder = self.reusable(image, wanted)
        if folder is not None:
            self.log(f"{image}: reusing {folder.name} from the history")
            self.good_run = self.good_run or folder  # the first image asked is the good one
            return folder, True, ""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", image).strip("-")[-40:]
        run_id = f"bisect-{slug}-{time.strftime('%Y%m%d-%H%M%S')}"
        layouts = list(dict.fromkeys(c for c, _ in wanted or ()))
        concurrencies = sorted({n for _, n in wanted or ()})
        # a layout-level point (C 0) runs every C; a gate run measures where the good run was
        argv = gate_command(
            self.pytest_args, self.sweep_dir, self.reports, run_id, image, layouts=layouts,
            concurrencies=concurrencies if wanted and all(n for _, n in wanted) else (),
            compare=self.good_run if layouts else None, thresholds=self.thresholds,
            clusters=self._clusters())
        self.log(f"{image}: measuring ({run_id}{', ' + ','.join(layouts) if layouts else ''}"
                 f"{' at C=' + ','.join(map(str, concurrencies)) if concurrencies else ''}): "
                 f"{shlex.join(['pytest', *argv])}")
        argv = [sys.executable, "-m", "pytest", *argv]
        try:
            done = subprocess.run(argv, cwd=self.sweep_dir, capture_output=True, text=True,
                                  timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return None, False, f"the gate run took longer than {self.timeout_s:g} s"
        folder = self.reports / run_id
        if not folder.is_dir():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            return None, False, f"pytest exited {done.returncode}: {' | '.join(tail)}"
        self.good_run = self.good_run or folder
        return folder, False, ""


def _clusters_of(folder: Path) -> str:
    """The clusters a run folder was measured on (run.json ``cluster``; "" when unknown)."""
    try:
        return load(folder).meta.cluster
    except (OSError, ValueError):
        return ""


def _measures(folder: Path, wanted: Wanted) -> bool:
    """Whether the run folder has valid rounds at every wanted point (a point without a C: at
    any C of its layout)."""
    try:
        data = load(folder)
    except (OSError, ValueError):
        return False
    valid = {(cid, int(c)) for (cid, c), rows in points(data.results).items()
             if valid_mask(rows).any()}
    return all((cid, n) in valid if n else any(v == cid for v, _ in valid)
               for cid, n in wanted)
