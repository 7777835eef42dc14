"""The adaptive sweep's decisions: which layout to boot next, when the best is decided, and
whether a point's third repeat can be skipped.

The objective is Input TPS (the mean of its log over the sweep's Cs). After each layout the
model is refitted; then:

* the best so far is the measured layout with the highest Input TPS;
* a layout not measured is still a contender when the top of its 90 % interval beats the best
  by more than the tolerance (and no other unmeasured layout's interval is entirely above it);
* no contender left: the best is decided, every other layout is "predicted, not measured";
* else the contender that tells the most per cluster-second is booted: the one whose
  measurement would shrink the contenders' predicted variance the most (the linearised
  posterior update), divided by its predicted cluster time (boot + rounds).

A fit that cannot reproduce its own measured points (a misfit, planner/trust.py) decides
nothing: the next layout in the sweep's order is booted, none is skipped, nothing is predicted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from pytest_ppsweep.planner.fitting import Z90, Fitted
from pytest_ppsweep.planner.trust import fit_trust

__all__ = ["Candidate", "Decision", "Workload", "decide", "skip_third_repeat"]

DEFAULT_TOLERANCE = 0.03
# The best is not declared on one layout: the model's error away from what was measured is
# unknown until a second layout checks it.
MIN_MEASURED = 2


@dataclass(frozen=True)
class Candidate:
    """A layout the sweep may boot (keyed by its Config.id, never parsed)."""

    config_id: str
    pp: int
    tp: int


@dataclass(frozen=True)
class Workload:
    concurrency: tuple[int, ...] = (8, 16)
    input_len: int = 16384
    num_requests: int = 40
    repeats: int = 3


@dataclass(frozen=True)
class Decision:
    """What to do next: boot ``boot`` (None: the best is decided), and why; why each other
    layout is not booted (now)."""

    boot: str | None
    reason: str
    best: str | None
    skipped: dict[str, str] = field(default_factory=dict)
    predicted: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def _score(fitted: Fitted, c: Candidate, wl: Workload) -> tuple[float, float, np.ndarray, float]:
    """Mean log Input TPS over the Cs, its sd, its gradient, and the predicted cluster time."""
    logs, sds, grads, secs = [], [], [], 0.0
    for conc in wl.concurrency:
        p = fitted.predict(c.pp, c.tp, conc, wl.input_len, wl.num_requests)
        logs.append(math.log(p.input_tps.value))
        sds.append(p.log_sd_tps)
        grads.append(np.asarray(p.grad_tps))
        secs += wl.repeats * wl.num_requests * wl.input_len / p.input_tps.value
        boot = max(p.boot_s.value, 1.0)
    return float(np.mean(logs)), float(np.mean(sds)), np.mean(grads, axis=0), secs + boot


def measured_scores(fitted: Fitted, wl: Workload) -> dict[str, float]:
    """Mean log Input TPS over the Cs of every layout measured at all of them."""
    out: dict[str, float] = {}
    for cid in {o["config_id"] for o in fitted.measured}:
        vals = [fitted.measured_point(cid, c) for c in wl.concurrency]
        if all(v is not None for v in vals):
            out[cid] = float(np.mean([math.log(v["input_tps"]) for v in vals if v]))
    return out


def decide(fitted: Fitted, candidates: Sequence[Candidate], wl: Workload,
           tolerance: float = DEFAULT_TOLERANCE) -> Decision:
    """The next layout to boot, or None when the best is decided (see the module docstring)."""
    done = measured_scores(fitted, wl)
    best = max(done, key=lambda k: done[k]) if done else None
    trust = fit_trust(fitted)
    if not trust.trusted:
        todo = [c for c in candidates if c.config_id not in done]
        why = f"{trust.summary()}: {'; '.join(trust.misfits)}; every layout is booted"
        return Decision(todo[0].config_id if todo else None, why, best)
    bar = done[best] + math.log1p(tolerance) if best else -math.inf
    rest = [c for c in candidates if c.config_id not in done]
    scored = {c.config_id: _score(fitted, c, wl) for c in rest}
    predicted = {cid: (math.exp(s[0]), math.exp(s[0] - Z90 * s[1]), math.exp(s[0] + Z90 * s[1]))
                 for cid, s in scored.items()}
    floor = max((s[0] - Z90 * s[1] for s in scored.values()), default=-math.inf)
    skipped: dict[str, str] = {}
    contenders: list[Candidate] = []
    confirm = len(done) < MIN_MEASURED
    for c in rest:
        mean, sd, _g, _t = scored[c.config_id]
        hi = mean + Z90 * sd
        value, lo_v, hi_v = predicted[c.config_id]
        band = f"Input TPS {value:,.0f} [{lo_v:,.0f}, {hi_v:,.0f}]"
        if confirm and best is not None:
            contenders.append(c)  # a second layout checks the model before any decision
        elif best is not None and hi <= bar:
            skipped[c.config_id] = (f"predicted {band}: cannot beat {best} "
                                    f"({math.exp(done[best]):,.0f} measured) by more than "
                                    f"{tolerance:.0%}")
        elif hi < floor:
            skipped[c.config_id] = f"predicted {band}: below another layout's whole interval"
        else:
            contenders.append(c)
    if not contenders:
        why = (f"best decided: {best} ({math.exp(done[best]):,.0f} Input TPS measured); no other "
               f"layout's 90 % interval beats it by more than {tolerance:.0%}") if best else \
            "no layout to boot"
        return Decision(None, why, best, skipped, predicted)
    # information per cluster-second: variance of the contenders' scores removed by measuring c
    cov = fitted.cov
    noise = fitted.noise["input_tps"]
    grads = {c.config_id: scored[c.config_id][2] for c in contenders}

    def gain(c: Candidate) -> float:
        g = grads[c.config_id]
        denom = float(g @ cov @ g) + noise**2 / max(len(wl.concurrency), 1)
        cg = cov @ g
        return sum(float((grads[u.config_id] @ cg) ** 2) / denom for u in contenders)

    ranked = sorted(contenders, key=lambda c: gain(c) / scored[c.config_id][3], reverse=True)
    pick = ranked[0]
    value, lo_v, hi_v = predicted[pick.config_id]
    vs = ("nothing measured yet" if not best else
          f"a second layout checks the model before {best} can be declared best" if confirm else
          f"could beat {best} ({math.exp(done[best]):,.0f}) by more than {tolerance:.0%}")
    why = (f"predicted Input TPS {value:,.0f} [{lo_v:,.0f}, {hi_v:,.0f}] {vs}; tells the most "
           f"per cluster-second of the {len(contenders)} contender(s) "
           f"(~{scored[pick.config_id][3]:,.0f} s)")
    for c in ranked[1:]:
        v, lo, hi = predicted[c.config_id]
        skipped.setdefault(c.config_id, f"not yet: predicted Input TPS {v:,.0f} [{lo:,.0f}, "
                                        f"{hi:,.0f}] still a contender")
    return Decision(pick.config_id, why, best, skipped, predicted)


def skip_third_repeat(tps: Sequence[float], threshold: float, fitted: Fitted | None,
                      config_id: str, wl: Workload,
                      tolerance: float = DEFAULT_TOLERANCE) -> str | None:
    """Why the third repeat of a point can be skipped, or None: its spread over two repeats is
    under ``threshold`` and no value inside that spread changes the decision (the layout is
    either clearly below the best measured other layout, or clearly above every other
    layout's measured value and predicted interval, by more than the spread plus the
    tolerance)."""
    if len(tps) != 2 or fitted is None:
        return None
    med = float(np.median(tps))
    spread = (max(tps) - min(tps)) / med if med > 0 else math.inf
    if spread >= threshold:
        return None
    others = {k: v for k, v in measured_scores(fitted, wl).items() if k != config_id}
    if not others:
        return None
    margin = math.log1p(spread + tolerance)
    best_other = max(others.values())
    here = math.log(med)
    if here + margin < best_other:
        return (f"spread {spread:.2%} < {threshold:.0%} after 2 repeats and {config_id} stays "
                f"below the best other layout by more than spread + {tolerance:.0%}")
    return None


def with_measured(fitted: Fitted, extra: list[dict[str, object]]) -> Fitted:
    """A copy that also knows ``extra`` measured points (for decisions within a layout)."""
    return replace(fitted, measured=[*fitted.measured, *extra])
