"""Gate a run against a reference run: per configuration × C, is a metric worse beyond noise?

Noise rule: stats/gatenoise.py, 5 × the median distance of a repeat
from its own run's median over both runs' valid repeats, in %: calibrated for two runs two boots
apart, so the gate keeps it rather than the decisions' within-run interval (stats/decision.py).
A delta whose size exceeds the noise is *significant*. Each metric row also records the two runs'
spread as a second level (``between_boots_pct``: each run one boot of the point, one-way
random-effects ANOVA of stats/decision.py): for an unchanged configuration, the boot-to-boot
spread that a single run's intervals do not hold. Each metric row gets one of three tiers:

* ``regression``: worse than its threshold and significant (fails the gate);
* ``significant``: significant but not beyond the threshold (either direction): shown and
  counted, the exit code unchanged; an improvement beyond the threshold is ``improvement``;
* ``inconclusive``: the medians' change is worse than the threshold but not larger than the
  noise: the two runs cannot tell a regression beyond the threshold from noise. It fails the
  gate, as a regression does: a gate that passed it would vouch for an image it could not check
  (more repeats a point narrow the noise);
* ``within noise``: the delta is not larger than the noise.

Beside the speed, each layout of the current run with outputs (the ``[correctness]`` probe) or a
task score (``[accuracy]``) gets a row for each, metric ``outputs`` / ``accuracy`` at C 0:
``agree`` when it passes its check against the reference run (and the run's own reference
layout: results/outputs.py, results/accuracy.py), else ``wrong``, which fails the gate: an image
that computes something else is no faster image. Only valid rounds count (the N/N rule of
``measure.completion``), so a failing server never looks fast. A point whose current rounds
are all invalid, or any of whose current rounds dropped requests, or whose configuration failed
to boot, is "broken" (the seeds' N-of-N rule is a hard gate). A point present in one run only
is listed, never skipped.
"""

from __future__ import annotations

import csv
import html
import io
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd

from pytest_ppsweep.folder.runfolder import GATE_CSV as GATE_CSV
from pytest_ppsweep.folder.runfolder import accuracy_json
from pytest_ppsweep.gate.benchjson import load, points, valid_mask
from pytest_ppsweep.matrix.schema import did_you_mean
from pytest_ppsweep.measure.completion import NN_KINDS, Shortfall
from pytest_ppsweep.results.accuracy import accuracy_problems
from pytest_ppsweep.results.aggregate import RunData, round_problems
from pytest_ppsweep.results.outputs import outputs_file, outputs_problems
from pytest_ppsweep.stats.decision import Sample, levels, sigma_pct
from pytest_ppsweep.stats.gatenoise import noise_pct

# The correctness rows' verdicts (metric OUTPUTS / ACCURACY, one row per layout, C 0): the
# layout's outputs (task score) pass their check against the reference run, or they do not.
AGREE = "agree"
WRONG = "wrong"
# A change worse than the threshold by the medians, but within the noise: not vouched for.
INCONCLUSIVE = "inconclusive"
VERDICTS = ("regression", INCONCLUSIVE, "significant", "improvement", "within noise",
            "only in current", "only in reference", "broken", WRONG, AGREE)
FAILING = frozenset({"regression", INCONCLUSIVE, "broken", WRONG})
# The correctness rows' metric names (not speed metrics: never in METRICS).
OUTPUTS = "outputs"
ACCURACY = "accuracy"
CORRECTNESS = (OUTPUTS, ACCURACY)
# Shown and counted in the summary line, never failing: changes beyond the noise under the
# threshold.
SIGNIFICANT = "significant"
# metric key → (results.csv column, label, unit, higher is better)
METRICS: dict[str, tuple[str, str, str, bool]] = {
    "input_tps": ("input_tps", "Input TPS", "", True),
    "ttft_p50": ("ttft_p50_s", "TTFT p50", " s", False),
    "ttft_p95": ("ttft_p95_s", "TTFT p95", " s", False),
    # decode workloads (SGLang bench_serving's definitions, measure/metrics.py); a point
    # whose workload has no value of a metric in either run is not gated on it
    "output_tps": ("output_tps", "Output TPS", "", True),
    "tpot_p50": ("tpot_p50_s", "TPOT p50", " s", False),
    "tpot_p99": ("tpot_p99_s", "TPOT p99", " s", False),
    "itl_p50": ("itl_p50_s", "ITL p50", " s", False),
    "itl_p99": ("itl_p99_s", "ITL p99", " s", False),
    "e2e_p50": ("e2e_p50_s", "E2E p50", " s", False),
    # GPU board energy per total token (measure/energy.py; not wall power): gated only when a
    # threshold names it (``energy_per_token:+5%``); a round whose energy is not valid has no
    # value, so only valid rounds count
    "energy_per_token": ("energy_j_per_total_token", "J/token", " J", False),
}
DEFAULT_THRESHOLDS = ("input_tps:-3%", "ttft_p50:+5%")
THRESHOLD_RANGE = (0.0, 100.0)
"""A higher-is-better metric's threshold (a drop) in %, exclusive: 0 % gates on noise alone (no
threshold at all), and a drop of 100 % or more cannot happen to a throughput."""
RISE_RANGE = (0.0, 10000.0)
"""A lower-is-better metric's threshold (a rise) in %, exclusive: a latency can rise by more than
100 %, and a very large threshold is how a gate is told to ignore a metric (×100 at most)."""
DECODE_GATED = ("output_tps", "tpot_p50", "tpot_p99", "itl_p50", "itl_p99", "e2e_p50")


class ThresholdError(ValueError):
    """A ``metric:±N%`` token that cannot be parsed; the message names the token."""


@dataclass(frozen=True)
class Threshold:
    """How far a metric may get worse, in % (negative for higher-is-better metrics)."""

    metric: str  # key of METRICS
    pct: float

    @property
    def column(self) -> str:
        return METRICS[self.metric][0]

    @property
    def label(self) -> str:
        return METRICS[self.metric][1]

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.metric][3]

    def worse(self, delta_pct: float) -> bool:
        """The delta is worse than the threshold allows."""
        return delta_pct < self.pct if self.higher_is_better else delta_pct > self.pct


@dataclass(frozen=True)
class Comparison:
    """One row of the gate: a metric of a configuration × C, or the whole point."""

    config_id: str
    concurrency: int  # 0: every concurrency (a configuration that did not boot)
    metric: str  # "" when the row is about the whole point
    ref: float | None
    cur: float | None
    delta_pct: float | None
    threshold_pct: float | None
    noise_pct: float | None
    verdict: str
    message: str
    # The two runs as two boots of the point (stats/decision.levels: rounds within a run's
    # boot, the runs' boots apart): σ between them beyond their rounds' spread, in %. For an
    # unchanged configuration (gate.csv ``differs`` empty) it is the boot-to-boot spread, the
    # second level a single run's intervals do not hold; with a change it holds the change too.
    between_boots_pct: float | None = None


def _parse_one(token: str) -> Threshold:
    name, sep, value = token.partition(":")
    name = name.strip().removesuffix("_s")
    if not sep or not value.strip():
        raise ThresholdError(f"threshold {token!r}: expected METRIC:±N% (e.g. input_tps:-3%)")
    if name not in METRICS:
        hint = did_you_mean(name, list(METRICS), quote=False)
        raise ThresholdError(f"threshold {token!r}: unknown metric {name!r}{hint}; expected one "
                             f"of {', '.join(METRICS)}")
    raw = value.strip().removesuffix("%").strip()
    try:
        pct = float(raw)
    except ValueError:
        raise ThresholdError(f"threshold {token!r}: expected a percentage like -3% or +5%, "
                             f"found {value.strip()!r}") from None
    if not math.isfinite(pct):
        raise ThresholdError(f"threshold {token!r}: expected a finite percentage")
    if not value.strip().endswith("%"):
        # A bare number could be a fraction (0.03) or a percentage (3): which one was meant
        # cannot be told, so the unit is required.
        raise ThresholdError(f"threshold {token!r}: expected a percentage with its unit, e.g. "
                             f"{name}:{raw}%; found {value.strip()!r} without '%'")
    higher = METRICS[name][3]
    low, high = THRESHOLD_RANGE if higher else RISE_RANGE
    if not low < abs(pct) < high:
        raise ThresholdError(
            f"threshold {token!r}: expected a size between {low:g} % and {high:g} % "
            f"(exclusive), found {abs(pct):g} %"
            + (" (a metric cannot drop by 100 % or more)" if higher and abs(pct) >= 100 else "")
        )
    signed = raw[:1] in "+-"
    if signed and (pct > 0 if higher else pct < 0):
        want = "a drop (-N%)" if higher else "a rise (+N%)"
        raise ThresholdError(f"threshold {token!r}: {METRICS[name][1]} is "
                             f"{'higher' if higher else 'lower'}-is-better, so its threshold is "
                             f"{want}; found {value.strip()!r}")
    return Threshold(name, -abs(pct) if higher else abs(pct))


def parse_thresholds(tokens: Iterable[str]) -> dict[str, Threshold]:
    """Defaults (input_tps -3 %, ttft_p50 +5 %) overridden by ``tokens``.

    A token is ``METRIC:N%`` (comma-separated lists allowed); an unsigned N is taken in the
    worse direction. A metric given twice is an error: which one was meant is not clear.
    """
    out = {t.metric: t for t in map(_parse_one, DEFAULT_THRESHOLDS)}
    given: set[str] = set()
    for token in (t.strip() for item in tokens for t in item.split(",")):
        if not token:
            continue
        th = _parse_one(token)
        if th.metric in given:
            raise ThresholdError(f"threshold {token!r}: {th.metric} is given twice")
        given.add(th.metric)
        out[th.metric] = th
    return out


def _pct(value: float, fmt: str = ",.2f") -> str:
    """``−6.92 %`` with a true minus sign, as the seeds' tables print deltas."""
    sign = "+" if value > 0 else "−" if value < 0 else "±"
    return f"{sign}{format(abs(value), fmt)} %"


def _where(cid: str, conc: int) -> str:
    return f"{cid} C={conc}" if conc else f"{cid} (every C)"


def _values(rows: pd.DataFrame, column: str) -> list[float]:
    return [float(v) for v in pd.to_numeric(rows[column], errors="coerce") if math.isfinite(v)]


def _spread(values: list[float]) -> float:
    med = statistics.median(values)
    return (max(values) - min(values)) / med * 100.0 if med else 0.0


def _metric_row(cid: str, conc: int, th: Threshold, ref: list[float], cur: list[float]) -> (
        Comparison):
    unit = METRICS[th.metric][2]
    r, c = statistics.median(ref), statistics.median(cur)
    delta = (c / r - 1.0) * 100.0 if r else math.inf
    noise = noise_pct(ref, cur)  # stats/gatenoise.py: the stated rule
    better = delta > 0 if th.higher_is_better else delta < 0
    if th.worse(delta) and abs(delta) > noise:
        verdict, why = "regression", "regression"
    elif th.worse(delta) and th.pct:
        verdict = INCONCLUSIVE
        why = ("inconclusive: worse than the threshold by the medians, but within the noise; "
               "the runs cannot tell a regression from noise (more repeats narrow the noise)")
    elif better and abs(delta) > max(noise, abs(th.pct)):
        verdict, why = "improvement", "improvement"
    elif abs(delta) > noise:
        verdict = SIGNIFICANT
        why = (f"significant change under the threshold ({abs(delta) / noise:.0f}× noise)"
               if noise else "significant change under the threshold (no noise)")
    else:
        verdict, why = "within noise", "within noise"
    message = (f"{_where(cid, conc)}: {th.label} {c:,.2f}{unit} vs {r:,.2f}{unit} "
               f"({_pct(delta)}, threshold {_pct(th.pct, 'g')}, noise "
               f"{noise:.1f} %) — {why}")
    found = levels(Sample([*ref, *cur], ["reference"] * len(ref) + ["current"] * len(cur)))
    between = (round(sigma_pct(found.between), 4) if found is not None and found.two_level
               and not math.isnan(found.between) else None)
    return Comparison(cid, conc, th.metric, r, c, delta, th.pct, noise, verdict, message,
                      between)


def _point(cid: str, conc: int, verdict: str, message: str) -> Comparison:
    return Comparison(cid, conc, "", None, None, None, None, None, verdict, message)


def _not_nn(row: dict[Any, Any], problems: list[Shortfall]) -> str:
    # ``r2 38/40 (2 failed)``; a round broken by its prompt tokens alone says so.
    text = (f"r{row['repeat']:g} {row['completed']:g}/{row['num_requests']:g}"
            f" ({row['failed']:g} failed)")
    extra = [p.text for p in problems if p.kind not in NN_KINDS]
    return f"{text}: {'; '.join(extra)}" if extra else text


def _boot_failed(run: RunData, cid: str) -> str | None:
    rows = run.configs[run.configs["config_id"] == cid]
    if rows.empty or str(rows.iloc[-1].get("boot_ok")).lower() not in ("false", "0", "0.0"):
        return None
    err = rows.iloc[-1].get("boot_error")
    return str(err) if isinstance(err, str) and err else "boot failed"


def compare(cur_run_dir: Path, ref_run_dir: Path,
            thresholds: Mapping[str, Threshold] | None = None,
            current: RunData | None = None, correctness: bool = True) -> list[Comparison]:
    """Every configuration × C of either run, per gated metric, with its verdict (``current``:
    what was read of the current run already), then each layout's correctness rows
    (:func:`correctness_rows`; ``correctness=False``: the speed alone)."""
    ths = dict(thresholds) if thresholds is not None else parse_thresholds([])
    cur = load(Path(cur_run_dir)) if current is None else current
    ref = load(Path(ref_run_dir))
    cur_groups, ref_groups = points(cur.results), points(ref.results)
    keys = list(dict.fromkeys([*ref_groups, *cur_groups]))
    out: list[Comparison] = []
    failed_boots: dict[str, str] = {}
    for cid in dict.fromkeys([*ref.configs["config_id"], *cur.configs["config_id"]]):
        reason = _boot_failed(cur, str(cid))
        if reason is not None and not any(k[0] == cid for k in cur_groups):
            failed_boots[str(cid)] = reason
    for cid, reason in failed_boots.items():
        concs = [k[1] for k in keys if k[0] == cid] or list(cur.meta.concurrencies) or [0]
        out += [_point(cid, c, "broken", f"{_where(cid, c)}: did not boot in the current run "
                       f"({reason}) — broken") for c in concs]
    for key in keys:
        cid, conc = key
        if cid in failed_boots:
            continue
        if key not in cur_groups:
            out.append(_point(cid, conc, "only in reference",
                              f"{_where(cid, conc)}: measured in the reference only"))
            continue
        rows = cur_groups[key]
        valid = rows[valid_mask(rows)]
        if len(valid) < len(rows):
            bad = rows[~valid_mask(rows)]
            detail = ", ".join(_not_nn(r, problems) for r, problems in
                               zip(bad.to_dict("records"), round_problems(bad), strict=True))
            out.append(_point(cid, conc, "broken", f"{_where(cid, conc)}: {len(bad)} of "
                              f"{len(rows)} rounds not N/N: {detail} — broken"))
            continue
        if key not in ref_groups:
            out.append(_point(cid, conc, "only in current",
                              f"{_where(cid, conc)}: measured in the current run only"))
            continue
        ref_valid = ref_groups[key][valid_mask(ref_groups[key])]
        for th in ths.values():
            ref_v, cur_v = _values(ref_valid, th.column), _values(valid, th.column)
            if th.metric in DECODE_GATED and not ref_v and not _measured(valid, th.column):
                continue  # this point's workload has no such metric (per-workload metrics)
            if not ref_v:
                out.append(_point(cid, conc, "only in current", f"{_where(cid, conc)}: no "
                                  f"valid {th.label} in the reference run"))
            elif cur_v:
                out.append(_metric_row(cid, conc, th, ref_v, cur_v))
            else:
                out.append(_point(cid, conc, "broken", f"{_where(cid, conc)}: no valid "
                                  f"{th.label} in the current run — broken"))
    # Same order as the other tables: by C, then sweep order (current run's, then reference's).
    rank = {c: i for i, c in enumerate(dict.fromkeys([*cur.meta.order, *ref.meta.order,
                                                       *(k[0] for k in keys)]))}
    out = sorted(out, key=lambda c: (c.concurrency, rank.get(c.config_id, len(rank))))
    ids = sorted(dict.fromkeys([*cur.meta.order, *(str(c) for c in cur.configs["config_id"])]),
                 key=lambda c: rank.get(c, len(rank)))
    if not correctness:
        return out
    return out + correctness_rows(Path(cur_run_dir), Path(ref_run_dir), ids)


def correctness_rows(cur_run_dir: Path, ref_run_dir: Path, ids: Iterable[str]
                     ) -> list[Comparison]:
    """Per layout of ``ids`` with outputs (a task score) in the current run, its ``outputs``
    (``accuracy``) row: ``agree`` or ``wrong`` against the reference run, the first problem
    named (module docstring)."""
    out: list[Comparison] = []
    checks: tuple[tuple[str, str, Callable[[str], Path], Callable[..., list[str]]], ...] = (
        (OUTPUTS, "outputs", lambda c: outputs_file(cur_run_dir, c), outputs_problems),
        (ACCURACY, "task score", lambda c: cur_run_dir / accuracy_json(c), accuracy_problems))
    for metric, what, file_of, problems_of in checks:
        for cid in ids:
            if not file_of(cid).is_file():
                continue
            found = problems_of(cur_run_dir, cid, ref_run_dir)
            if found:
                more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
                first = found[0].removeprefix(f"{cid}: ")
                row = _point(cid, 0, WRONG, f"{cid}: {what} wrong against the reference run "
                             f"{ref_run_dir.name}: {first}{more} — wrong")
            else:
                row = _point(cid, 0, AGREE, f"{cid}: {what} agree with the reference run "
                             f"{ref_run_dir.name}")
            out.append(replace(row, metric=metric))
    return out


def correctness_failures(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """The correctness rows that fail: outputs or task scores wrong against the reference."""
    return [c for c in comparisons if c.metric in CORRECTNESS and c.verdict == WRONG]


def wrong_image_line(comparisons: Iterable[Comparison]) -> str:
    """``GATE FAILED: this image computes wrong outputs on 2 of 2 layouts, task scores on 1
    …`` when correctness rows fail (the first words of every view of a gated run), else ""."""
    rows = list(comparisons)
    bad = correctness_failures(rows)
    if not bad:
        return ""
    parts = []
    for metric, what in ((OUTPUTS, "outputs"), (ACCURACY, "task scores")):
        mine = [c for c in rows if c.metric == metric]
        wrong = [c for c in bad if c.metric == metric]
        if wrong:
            parts.append(f"wrong {what} on {len(wrong)} of {len(mine)} layouts")
    return ("GATE FAILED: this image computes " + " and ".join(parts)
            + " against the reference run; do not use it, whatever its speed.")


def read_comparison_csv(run_dir: Path) -> list[Comparison]:
    """gate.csv's rows (KeyError/ValueError on a malformed file; [] without one)."""
    path = Path(run_dir) / GATE_CSV
    if not path.is_file():
        return []

    def number(text: str) -> float | None:
        return float(text) if text.strip() else None

    with path.open(newline="", encoding="utf-8") as fh:
        return [Comparison(r["config_id"], int(r["concurrency"] or 0), r["metric"],
                           number(r["ref"]), number(r["cur"]), number(r["delta_pct"]),
                           number(r["threshold_pct"]), number(r["noise_pct"]), r["verdict"],
                           r["message"]) for r in csv.DictReader(fh)]


def _measured(rows: pd.DataFrame, column: str) -> bool:
    """Whether results.csv has the column with a value for these rows (an older run folder
    has no decode columns; a prefill workload has no TPOT)."""
    return column in rows.columns and bool(pd.to_numeric(rows[column], errors="coerce")
                                           .notna().any())


def regressions(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """The rows that fail the gate: regressions, changes beyond the threshold not told from
    noise, broken points and wrong outputs."""
    return [c for c in comparisons if c.verdict in FAILING]


def significant(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """The rows beyond the noise but not beyond the threshold: shown, never failing."""
    return [c for c in comparisons if c.verdict == SIGNIFICANT]


def notable_lines(comparisons: list[Comparison]) -> list[str]:
    """``WRONG <message>`` for each layout whose outputs or task score fail against the
    reference, ``REGRESSION <message>`` (``INCONCLUSIVE``: not told from noise) for each other
    failing row, then ``SIGNIFICANT
    <message>`` for each change beyond the noise under the threshold: what the gate saw, under
    its table."""
    wrong = correctness_failures(comparisons)
    return ([f"WRONG {r.message}" for r in wrong]
            + [f"{'INCONCLUSIVE' if r.verdict == INCONCLUSIVE else 'REGRESSION'} {r.message}"
               for r in regressions(comparisons) if r not in wrong]
            + [f"SIGNIFICANT {r.message}" for r in significant(comparisons)])


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


TABLE_TITLES = ("config", "C", "metric", "verdict", "reference", "current", "Δ %", "thr %",
                "noise %")


def table_rows(comparisons: Iterable[Comparison]) -> list[list[str]]:
    """The gate's rows as text cells under :data:`TABLE_TITLES` (the report lays them out:
    report/summary.gate_table), the verdict before the numbers."""
    return [[c.config_id, str(c.concurrency or "all"), c.metric or "—", c.verdict,
             _num(c.ref, ",.2f"), _num(c.cur, ",.2f"), _num(c.delta_pct, "+.2f"),
             _num(c.threshold_pct, "+g"), _num(c.noise_pct, ".1f")] for c in comparisons]


def verdict_counts(comparisons: Sequence[Comparison]) -> str:
    """``regression: 1, ok: 7``: how many rows of each verdict."""
    counts = {v: sum(c.verdict == v for c in comparisons) for v in VERDICTS}
    return ", ".join(f"{v}: {n}" for v, n in counts.items() if n) or "nothing to compare"


def correctness_lines(comparisons: Iterable[Comparison]) -> list[str]:
    """``outputs: agree on 2 of 2 layouts`` / ``outputs: WRONG on 1 of 2 layouts (…)`` /
    ``outputs: not compared (no layout has outputs: [correctness] off?)``, and the same for
    ``accuracy``: the gate says what it compared besides the speed."""
    rows = list(comparisons)
    out = []
    for metric, why in ((OUTPUTS, "no layout has outputs: [correctness] off"),
                        (ACCURACY, "no layout has a task score: no [accuracy] table")):
        mine = [c for c in rows if c.metric == metric]
        wrong = [c.config_id for c in mine if c.verdict == WRONG]
        if not mine:
            out.append(f"{metric}: not compared ({why})")
        elif wrong:
            out.append(f"{metric}: WRONG on {len(wrong)} of {len(mine)} layouts "
                       f"({', '.join(wrong)}) — fails the gate")
        else:
            out.append(f"{metric}: agree on {len(mine)} of {len(mine)} layouts")
    return out


def comparison_html(comparisons: list[Comparison]) -> str:
    """An HTML table of the gate, every value escaped; rows carry ``ppsweep-gate-<verdict>``."""
    head = "".join(f"<th>{h}</th>" for h in ("configuration", "C", "metric", "reference",
                                             "current", "Δ %", "threshold %", "noise %",
                                             "verdict", "detail"))
    rows = []
    for c in comparisons:
        cells = (c.config_id, str(c.concurrency or "all"), c.metric or "—",
                 _num(c.ref, ",.2f"), _num(c.cur, ",.2f"), _num(c.delta_pct, "+.2f"),
                 _num(c.threshold_pct, "+g"), _num(c.noise_pct, ".1f"), c.verdict, c.message)
        cls = "ppsweep-gate-" + c.verdict.replace(" ", "-")
        rows.append(f'<tr class="{cls}">' + "".join(f"<td>{html.escape(x)}</td>" for x in cells)
                    + "</tr>")
    return (f'<table class="ppsweep-gate"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def write_comparison_csv(run_dir: Path, comparisons: list[Comparison]) -> Path:
    """Write ``<run_dir>/gate.csv`` (one row per comparison) and return its path."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Comparison)])
    writer.writeheader()
    for c in comparisons:
        writer.writerow({k: "" if v is None else v for k, v in asdict(c).items()})
    path = Path(run_dir) / GATE_CSV
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(out.getvalue(), encoding="utf-8")
    tmp.replace(path)
    return path
