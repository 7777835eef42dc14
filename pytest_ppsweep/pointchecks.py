"""Checks that read like pytest failures: what was expected, what was found, where.

Each function returns the list of problems (empty when fine) so tests can ``assert not problems``
and show every problem at once, and so the same checks feed the report's verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep import gate
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.gate.sloregress import slo_regressions
from pytest_ppsweep.matrix.deployment import ServerGroup
from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.measure.completion import NN_KINDS, result_problems
from pytest_ppsweep.measure.metrics import RoundResult
from pytest_ppsweep.profile.attribution import LayoutProfile
from pytest_ppsweep.results.accuracy import accuracy_problems as task_accuracy_problems
from pytest_ppsweep.results.outputs import outputs_problems as problems
from pytest_ppsweep.results.replace import only_nn, replaced
from pytest_ppsweep.service.logscan import Finding
from pytest_ppsweep.service.probe import Topology


def topology_problems(
    config: Config, server: Mapping[str, Any], topo: Topology, nnodes: int,
    group: ServerGroup | None = None,
    groups: Mapping[str, tuple[Topology, int]] | None = None,
) -> list[str]:
    """Compare what the server reports with what the matrix asked for (the engine reads its
    own server info: engine/): the layout's one serve group, or ``group`` of a layout of
    several (each message then names the group: ``p1-…-d1-… decode0``). A layout of several
    groups is checked group by group from ``groups`` (label → the group's topology and nodes,
    ``Booted.group_topologies``), each against the group's own server arguments (``server``,
    then the group's flags); ``topo`` and ``nnodes`` are then not read."""
    if group is None and config.deployed is not None:
        if groups is None:
            return [f"{config.id}: a layout of {len(config.deployed.groups)} server groups is "
                    "checked group by group: pass groups=<booted>.group_topologies"]
        found: list[str] = []
        for g in config.deployed.groups:
            if g.label not in groups:
                found.append(f"{config.id} {g.label}: no topology read from the group")
                continue
            g_topo, g_nodes = groups[g.label]
            found += topology_problems(config, {**server, **g.flags}, g_topo, g_nodes, g)
        return found
    shape = group or config.deployment.serve_group
    want = {"pp": shape.pp, "tp": shape.tp, "ep": shape.ep, "nnodes": nnodes}
    where = f"{config.id} {shape.label}" if shape.label else config.id
    return engine_of(config.engine).topology_problems(where, want, server, topo)


def completion_problems(
    config_id: str, concurrency: int, rounds: Sequence[RoundResult], min_repeats: int = 0
) -> list[str]:
    """The N/N rule (``measure.completion``): every repeat completed every request with zero
    errors and the server counted the prompt tokens sent; and no more than C in flight.
    ``min_repeats`` > 0: one round that missed N/N and was replaced (``results.replace``: the
    point still has ``min_repeats`` valid rounds) is not a problem (:func:`replaced_rounds`
    names it)."""
    problems = []
    skip = _replaced(rounds, min_repeats)
    for i, r in enumerate(rounds, start=1):
        shortfalls = result_problems(r)
        if i in skip:
            continue
        if any(s.kind in NN_KINDS for s in shortfalls):
            reasons = ", ".join(f"{k} ×{v}" for k, v in sorted(r.errors.items())) or "none given"
            problems.append(
                f"{config_id} C={concurrency} repeat {i}: {r.completed}/{r.num_requests} "
                f"completed, {r.failed} failed ({reasons})"
            )
        problems.extend(f"{config_id} C={concurrency} repeat {i}: {s}"
                        for s in shortfalls if s.kind not in NN_KINDS)
        if r.peak_concurrency > concurrency:
            problems.append(
                f"{config_id} C={concurrency} repeat {i}: {r.peak_concurrency} requests in "
                f"flight, more than C"
            )
    return problems


def _replaced(rounds: Sequence[RoundResult], min_repeats: int) -> set[int]:
    """The repeat (1-based) of the one N/N miss that a replacement round made good, if any."""
    if min_repeats <= 0:
        return set()
    found = [result_problems(r) for r in rounds]
    nn = [i for i, p in enumerate(found, start=1) if only_nn(p)]
    other = sum(1 for p in found if p and not only_nn(p))
    valid = sum(1 for p in found if not p)
    return set(nn) if replaced(len(nn), other, valid, min_repeats) else set()


def replaced_rounds(config_id: str, concurrency: int, rounds: Sequence[RoundResult],
                    min_repeats: int) -> list[str]:
    """The round that missed N/N and was replaced while the layout was up (kept as evidence,
    a warning: ``results.replace``), one line naming its errors."""
    out = []
    for i, r in enumerate(rounds, start=1):
        if i in _replaced(rounds, min_repeats):
            reasons = ", ".join(f"{k} ×{v}" for k, v in sorted(r.errors.items())) or "none given"
            out.append(f"{config_id} C={concurrency} repeat {i}: {r.completed}/"
                       f"{r.num_requests} completed, {r.failed} failed ({reasons}); replaced "
                       "by another round")
    return out


def log_problems(findings: Sequence[Finding], limit: int = 40) -> list[str]:
    """Every fatal line, with file and line number."""
    shown = [str(f) for f in findings[:limit]]
    if len(findings) > limit:
        shown.append(f"... and {len(findings) - limit} more")
    return shown


@dataclass(frozen=True)
class Validity:
    """What the verdict of one point says: the reasons it is INVALID (each a line naming the
    point) and the warnings of a VALID one (a spread above the threshold under
    ``spread_rule = "warn"``)."""
    problems: list[str]
    warnings: list[str]


def validity_problems(run_dir: Path, config_id: str, concurrency: int) -> Validity:
    """The verdict of ``config_id`` at ``concurrency`` from the run folder so far (the rules of
    ``results.verdict``: N/N and prompt tokens of every repeat, spread of Input TPS over the
    repeats, repeats ≥ min_repeats, boot and topology; the log scan once recorded)."""
    from pytest_ppsweep.results.verdict import point_verdict  # pandas: only when asked

    verdict = point_verdict(run_dir, config_id, concurrency)
    where = f"{config_id} C={concurrency}"
    return Validity(
        problems=[f"{where}: INVALID: {reason}" for reason in verdict.failures],
        warnings=[f"{where}: {reason}" for reason in verdict.warnings],
    )


def repeat_median(rounds: Sequence[RoundResult], metric: str) -> float | None:
    """The median over the repeats of one point of a results.csv metric (``input_tps``,
    ``ttft_p50_s``, …), the summary's rule (``results.aggregate.median_over_repeats``); None
    when no repeat has it."""
    from pytest_ppsweep.results.aggregate import median_over_repeats  # pandas: only when asked

    return median_over_repeats([r.as_row()[metric] for r in rounds])


def regression_problems(run_dir: Path, reference: Path, thresholds: Mapping[str, Any],
                        config_id: str, concurrency: int) -> list[str]:
    """The gate's regressions of ``config_id`` at ``concurrency`` (and its boot, C 0) against
    the reference run, each with the noise of both runs, followed by what else differs from
    the reference's point (image, flags, env, workload); empty when there is none."""
    # speed alone: the outputs and the task score have their own tests (test_outputs_match,
    # test_accuracy), which judge them against the reference run too
    rows = gate.compare(run_dir, reference, thresholds, correctness=False)
    mine = [r for r in rows if r.config_id == config_id and r.concurrency in (0, concurrency)]
    bad = gate.regressions(mine)
    if not bad:
        return []
    return [r.message for r in bad] + gate.differs_lines(run_dir, reference, [config_id])


def slo_regression_problems(run_dir: Path, reference: Path, config_id: str) -> list[str]:
    """The gate's SLO check of ``config_id``: its highest load within the SLO fell beyond noise
    against the reference run (gate/sloregress.py); empty when it did not."""
    return slo_regressions(run_dir, reference, config_id)


def accuracy_problems(run_dir: Path, config_id: str, reference: Path | None = None
                      ) -> list[str]:
    """Why ``config_id``'s ``[accuracy]`` task score fails: a question that could not be asked,
    a score below ``min_score``, significantly worse than the run's reference layout
    (parallelism must not change accuracy) or, under the gate, than the baseline run's score.
    Each line names both scores, their intervals, n and the threshold (results/accuracy.py)."""
    return task_accuracy_problems(run_dir, config_id, reference)


def outputs_problems(run_dir: Path, config_id: str, reference: Path | None = None) -> list[str]:
    """Where ``config_id``'s greedy outputs (the ``[correctness]`` probe) disagree with the run's
    reference layout and, under the gate, with the reference run's: each line names the prompt,
    the first differing position, both tokens and both logprobs (results/outputs.py: the
    divergence rule and the tolerance, with their sources)."""
    return problems(run_dir, config_id, reference)


def profile_problems(profile: LayoutProfile, config: Config) -> list[str]:
    """What is wrong with a layout's profile window: a rank of a multi-rank layout whose trace
    shows no collective call at all (a rank that did not take part in the window), or no trace."""
    if not profile.ranks:
        return [f"{config.id}: the profile window produced no trace"]
    if config.gpus == 1:
        return []
    return [
        f"{config.id}: rank {r.rank} ({r.path.rsplit('/', 1)[-1]}): no collective call in its "
        f"{r.window_ms:,.1f} ms window ({r.source} trace)"
        for r in profile.ranks
        if r.total_calls == 0
    ]


class ExpectedFailure(Exception):
    """A point's failure that its sweep's ``[[expect]]`` names (matrix/expectspec.py): its tests
    are marked ``xfail(strict=True, raises=ExpectedFailure)``, so this and only this is XFAIL."""
