"""The commands a run prints for its user to run next, built in one place.

Three commands come out of a run: the **resume** of an interrupted or partial run
(``--ppsweep-resume``), the **rerun** that separates an inconclusive answer's points
(``--ppsweep-reuse``, more repeats or boots), and each **gate run** of a bisection
(``python -m pytest_ppsweep bisect``: the sweep measured on one image). Each starts from the
command line that made the run (run.json ``args``: pytest's own arguments, as given), so it
keeps every option that shaped it: the cluster (``--ppsweep-cluster``), the sweep file, the
workloads and concurrencies, the reports folder, the plugins and their options. Only the options
that name the run or choose its points are replaced:

* :data:`RUN_NAMING` (``--ppsweep-resume``, ``--ppsweep-run-id``, ``--ppsweep-reuse``): every
  command names its own run;
* :data:`SELECTION` (``-k``, ``-m``, ``--ppsweep-config``, ``--ppsweep-concurrency``): a partial
  run's resume drops them to measure the rest; an interrupted run's keeps them (it finishes
  what was asked);
* a rerun replaces the points (``-k``, ``-m``, ``--ppsweep-config``) and how often they are
  measured (``--ppsweep-repeats``, ``--ppsweep-boots``); it keeps the concurrencies;
* a gate run is the sweep on one image against the good image's run, with the user's extra
  arguments, on the reference run's clusters unless those arguments name one.

A run folder written before run.json recorded its command line gives the rerun from what it
did record: its sweep file and its clusters.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RUN_NAMING", "SELECTION", "gate_command", "rerun_command", "resume_command",
           "without"]

RUN_NAMING = ("--ppsweep-resume", "--ppsweep-run-id", "--ppsweep-reuse")
SELECTION = ("-k", "-m", "--ppsweep-config", "--ppsweep-concurrency")
_POINTS = ("-k", "-m", "--ppsweep-config")
_MEASURE = ("--ppsweep-repeats", "--ppsweep-boots")
CLUSTER = "--ppsweep-cluster"


def without(args: Sequence[str], options: Sequence[str]) -> list[str]:
    """``args`` less each of ``options`` (each takes a value: ``--opt V``, ``--opt=V``, and for
    a short option its value attached, ``-kpp8``)."""
    kept: list[str] = []
    skip = False
    longs = tuple(f"{o}=" for o in options if o.startswith("--"))
    shorts = tuple(o for o in options if not o.startswith("--"))
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in options:
            skip = True
            continue
        if longs and arg.startswith(longs):
            continue
        if shorts and arg.startswith(shorts) and not arg.startswith("--"):
            continue  # -kpp8, -mslow: the value attached
        kept.append(arg)
    return kept


def resume_command(args: Sequence[str], run_id: str, *, every_layout: bool = False) -> str:
    """``pytest <args> --ppsweep-resume <run_id>``: the command line of this run, without the
    options that name a run, resuming this run folder; ``every_layout`` (a partial run) also
    without the options that narrowed its selection, so that it measures the rest."""
    dropped = (*RUN_NAMING, *(SELECTION if every_layout else ()))
    return shlex.join(["pytest", *without(args, dropped), "--ppsweep-resume", run_id])


def rerun_command(args: Sequence[str] | None, points: Sequence[str], repeats: int,
                  boots: int, run_dir: Path, *, matrix: str = "", clusters: str = "") -> str:
    """The command that measures ``points`` again with ``repeats`` repeats (per boot, on
    ``boots`` boots each: ``--ppsweep-boots``), taking everything else over from the run in
    ``run_dir`` (``--ppsweep-reuse``). ``args``: that run's command line (None: not recorded;
    then its sweep file ``matrix`` and its ``clusters``, comma-separated, are named)."""
    if args is None:
        sweep = matrix or "test_matrix/ppsweep.toml"
        base = [str(Path(sweep).parent) if matrix else "test_matrix", "--ppsweep-matrix", sweep]
        if clusters:
            base += [CLUSTER, clusters]
    else:
        base = without(args, (*RUN_NAMING, *_POINTS, *_MEASURE))
    parts = ["pytest", *base, "--ppsweep-config", ",".join(points),
             "--ppsweep-repeats", str(repeats)]
    if boots > 1:
        parts += ["--ppsweep-boots", str(boots)]
    parts += ["--ppsweep-reuse", str(run_dir)]
    return shlex.join(parts)


def gate_command(args: Sequence[str], sweep_dir: Path, reports: Path, run_id: str, image: str,
                 *, layouts: Sequence[str] = (), concurrencies: Sequence[int] = (),
                 compare: Path | None = None, thresholds: Sequence[str] = (),
                 clusters: str = "") -> list[str]:
    """pytest's arguments for one gate run of a bisection: the sweep in ``sweep_dir`` on
    ``image``, into ``reports`` as ``run_id``, only ``layouts`` at ``concurrencies`` (none:
    every one), against the run ``compare`` with ``thresholds``, plus the user's ``args``;
    on the reference run's ``clusters`` unless ``args`` name the cluster (a gate run measures
    where the reference was measured)."""
    argv = [str(sweep_dir), "-p", "no:cacheprovider", "--ppsweep-reports", str(reports),
            "--ppsweep-run-id", run_id, "--ppsweep-image", image]
    if clusters and not any(a == CLUSTER or a.startswith(f"{CLUSTER}=") for a in args):
        argv += [CLUSTER, clusters]
    if layouts:
        argv += ["--ppsweep-config", ",".join(layouts)]
    if concurrencies:
        argv += ["--ppsweep-concurrency", ",".join(map(str, concurrencies))]
    if compare is not None:
        argv += ["--ppsweep-compare", str(compare)]
    for t in thresholds:
        argv += ["--ppsweep-threshold", t]
    return [*argv, *args]
