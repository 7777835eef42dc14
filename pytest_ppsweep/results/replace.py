"""The replacement-round rule, once: a failed round is evidence, not a silent
exclusion.

A round that misses N/N (a request incomplete or failed, or no request at all:
``measure.completion``'s N/N kinds) is kept in results.csv and raw/ with its errors, and while
the layout is still up **one** replacement round of that point runs right after the point's
planned rounds (or right after the failed round, when that was itself an extra round). Then:

- one failed round, and the point still has its ``min_repeats`` valid rounds: the failure is a
  *warning* of a VALID point ("... in repeat 2 (replaced)"); its valid rounds are judged like
  any other point's;
- a second failed round at that point (the replacement, or another round): the point is
  INVALID at that C, every failed round named.

A failure of another kind (prompt or completion tokens counted wrong: another workload ran) is
never replaced: it says the point is not the intended measurement, not that a request was lost.

Pure: run/rounds.py asks :func:`replacement_for` while the layout is up, and the verdict
(results/verdict.py) asks :func:`replaced` of the run folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ppsweep.measure.completion import NN_KINDS, Shortfall, row_problems

__all__ = ["missed_nn", "only_nn", "replaced", "replacement_for"]


def only_nn(problems: Sequence[Shortfall]) -> bool:
    """Whether a round's problems are all N/N misses (and there is one)."""
    return bool(problems) and all(p.kind in NN_KINDS for p in problems)


def missed_nn(row: Mapping[str, Any]) -> bool:
    """Whether the results.csv round of ``row`` missed N/N and nothing else."""
    return only_nn(row_problems(row))


def replacement_for(failed: Sequence[int], repeat: int, planned: int) -> str | None:
    """What round ``repeat`` of a point replaces, or None: with exactly one round (``failed``:
    the repeats that missed N/N so far) failed, the round after the later of the planned rounds
    and the failed round is its replacement; no second replacement."""
    if len(failed) != 1 or repeat != max(failed[0], planned) + 1:
        return None
    return f"round {failed[0]}, which missed N/N"


def replaced(failed_nn: int, failed_other: int, valid: int, min_repeats: int) -> bool:
    """Whether a point's failed rounds are warnings (one N/N miss, replaced: ``valid`` ≥
    ``min_repeats``) rather than failures."""
    return failed_nn == 1 and failed_other == 0 and valid >= max(1, min_repeats)
