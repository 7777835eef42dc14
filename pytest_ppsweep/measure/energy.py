"""A round's GPU energy and its price per token: from NVML's energy counter where every GPU has
it, else from sampled power integrated over the window; each figure with its method and the
reasons it is not valid, and an invalid figure never shown as a number.

*Counter* (the preferred method): the energy of a window is the difference of each GPU's counter
read just before and just after it. The counter moves in steps (every ~100 ms on an H100), so
each end can be off by up to one step's energy: the figure carries that bound
(``uncertainty_j``), and a window too short for it (bound over :data:`MAX_COUNTER_SHARE` of the
figure) is not valid.

*Sampled power* (the fallback): per GPU, the trapezoid integral of its samples over the window,
with the power at each edge interpolated between the samples either side of it (InferenceX's
rule). It is valid only when a sample lies at or before the window's start and at or after its
end, and no two consecutive samples inside it are further apart than ``max_gap_s``.

*A round* (:func:`of_round`): every node's counters read just before and just after it
(cluster/nodeinfo.read_energy), the difference cut to the round's own edges at the power each
read saw; a cluster without GPUs gives ``no_gpus`` and a node that cannot read NVML
``nvml_unavailable``, never a 0. results.csv's :data:`ENERGY_COLUMNS` hold the figures.

Every figure is GPU board energy, not wall power (no CPU, memory, fans, network or PSU losses):
:data:`LABEL` says so wherever it is shown. :data:`SCHEMA_VERSION` versions the JSON it writes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pytest_ppsweep.cluster.power import CounterRead, EnergyRead, PowerSample

__all__ = ["ENERGY_COLUMNS", "LABEL", "MAX_COUNTER_SHARE", "SCHEMA_VERSION", "EnergyPerToken",
           "GpuEnergy", "WindowEnergy", "from_counter", "from_power", "of_round"]

SCHEMA_VERSION = 1
# results.csv's energy columns, one round each (EnergyPerToken.as_row); the folder's list of
# columns names them too (folder/runfolder.py RESULT_COLUMNS)
ENERGY_COLUMNS = ("energy_j", "energy_j_per_input_token", "energy_j_per_output_token",
                  "energy_j_per_total_token", "energy_j_per_request", "energy_method",
                  "energy_reasons", "energy_schema")
LABEL = "GPU board energy, not wall power"
COUNTER_STEP_S = 0.1  # NVML's counter step on an H100 (tests/data/energy-h100)
MAX_COUNTER_SHARE = 0.05  # a counter figure whose step bound exceeds 5 % of it is not valid

Method = Literal["counter", "sampled_power"]

# Validity reasons (kept with the figure; their words are InferenceX's where it has one).
EXPECTED_GPU_COUNT_MISMATCH = "expected_gpu_count_mismatch"
COUNTER_MISSING = "counter_missing"
COUNTER_RESET = "counter_reset"
WINDOW_TOO_SHORT = "window_too_short_for_counter_step"
NOT_BRACKETED = "benchmark_window_not_bracketed"
SAMPLING_GAP = "sampling_gap_exceeded"
EMPTY_WINDOW = "empty_window"


@dataclass(frozen=True)
class GpuEnergy:
    """One GPU's energy over a window, or why there is none."""

    gpu: str
    joules: float | None
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class WindowEnergy:
    """All GPUs' energy over one window (a round): the sum is valid only when every GPU's is,
    and the GPU count is the one the layout uses."""

    method: Method
    start_s: float
    end_s: float
    gpus: tuple[GpuEnergy, ...]
    expected_gpus: int
    uncertainty_j: float = 0.0
    extra_reasons: tuple[str, ...] = field(default=())

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every reason this figure is not valid, each once, in order (empty: valid)."""
        seen: list[str] = list(self.extra_reasons)
        if len(self.gpus) != self.expected_gpus:
            seen.append(EXPECTED_GPU_COUNT_MISMATCH)
        for g in self.gpus:
            seen.extend(g.reasons)
        return tuple(dict.fromkeys(seen))

    @property
    def valid(self) -> bool:
        return not self.reasons

    @property
    def joules(self) -> float | None:
        """The window's energy in J, None when not valid (never a number that is not one)."""
        if not self.valid:
            return None
        return sum(g.joules or 0.0 for g in self.gpus)

    @property
    def mean_power_w(self) -> float | None:
        j = self.joules
        return None if j is None or self.end_s <= self.start_s else j / (self.end_s - self.start_s)

    def per_token(self, input_tokens: int, output_tokens: int, requests: int) -> EnergyPerToken:
        """J per input, output and total token and per request over this window."""
        return EnergyPerToken(self.joules, input_tokens, output_tokens, requests, self.method,
                              self.reasons)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "label": LABEL,
            "method": self.method,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "joules": self.joules,
            "uncertainty_j": round(self.uncertainty_j, 3),
            "valid": self.valid,
            "reasons": list(self.reasons),
            "gpus": [{"gpu": g.gpu, "joules": g.joules, "reasons": list(g.reasons)}
                     for g in self.gpus],
        }


@dataclass(frozen=True)
class EnergyPerToken:
    """A window's energy divided by what it served. Every ratio is None when the energy is not
    valid or its divisor is 0; :meth:`text` says why instead of printing a number."""

    joules: float | None
    input_tokens: int
    output_tokens: int
    requests: int
    method: Method
    reasons: tuple[str, ...]

    def _per(self, n: int) -> float | None:
        return None if self.joules is None or n <= 0 else self.joules / n

    @property
    def j_per_input_token(self) -> float | None:
        return self._per(self.input_tokens)

    @property
    def j_per_output_token(self) -> float | None:
        return self._per(self.output_tokens)

    @property
    def j_per_total_token(self) -> float | None:
        return self._per(self.input_tokens + self.output_tokens)

    @property
    def j_per_request(self) -> float | None:
        return self._per(self.requests)

    def text(self) -> str:
        """One line for a table: the figure with its method and label, or why there is none."""
        if self.joules is None:
            return f"energy not valid ({', '.join(self.reasons)})"
        total = self.j_per_total_token
        out = self.j_per_output_token
        parts = [f"{total:.3g} J/token" if total is not None else "",
                 f"{out:.3g} J/output token" if out is not None else ""]
        return f"{', '.join(p for p in parts if p)} ({self.method}; {LABEL})"

    def as_row(self) -> dict[str, Any]:
        """The results.csv energy columns (:data:`ENERGY_COLUMNS`): a figure that is not valid
        is blank, with its reasons beside it (never a number, never 0)."""
        return {
            "energy_j": None if self.joules is None else round(self.joules, 3),
            "energy_j_per_input_token": self.j_per_input_token,
            "energy_j_per_output_token": self.j_per_output_token,
            "energy_j_per_total_token": self.j_per_total_token,
            "energy_j_per_request": self.j_per_request,
            "energy_method": self.method if self.joules is not None else "",
            "energy_reasons": ";".join(self.reasons),
            "energy_schema": SCHEMA_VERSION,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "label": LABEL,
            "method": self.method,
            "joules": self.joules,
            "j_per_input_token": self.j_per_input_token,
            "j_per_output_token": self.j_per_output_token,
            "j_per_total_token": self.j_per_total_token,
            "j_per_request": self.j_per_request,
            "reasons": list(self.reasons),
        }


def from_counter(
    before: Mapping[str, CounterRead],
    after: Mapping[str, CounterRead],
    expected_gpus: int,
    step_s: float = COUNTER_STEP_S,
) -> WindowEnergy:
    """The window between two reads of every GPU's counter (keyed by GPU). A GPU read at only
    one end is ``counter_missing``; a counter that went down (the driver reloaded) is
    ``counter_reset``; a window whose step bound is over :data:`MAX_COUNTER_SHARE` of its energy
    is ``window_too_short_for_counter_step``."""
    gpus: list[GpuEnergy] = []
    starts = [r.t_s for r in before.values()] or [0.0]
    ends = [r.t_s for r in after.values()] or [0.0]
    start, end = min(starts), max(ends)
    bound = 0.0
    for gpu in sorted(set(before) | set(after)):
        b, a = before.get(gpu), after.get(gpu)
        if b is None or a is None:
            gpus.append(GpuEnergy(gpu, None, (COUNTER_MISSING,)))
            continue
        if a.energy_mj < b.energy_mj:
            gpus.append(GpuEnergy(gpu, None, (COUNTER_RESET,)))
            continue
        joules = (a.energy_mj - b.energy_mj) / 1000.0
        span = a.t_s - b.t_s
        # each end may be up to one step stale: a step's worth of the window's mean power
        gpu_bound = 2 * step_s * joules / span if span > 0 else float("inf")
        bound += gpu_bound
        gpus.append(GpuEnergy(gpu, joules))
    total = sum(g.joules or 0.0 for g in gpus)
    extra: tuple[str, ...] = ()
    if end <= start:
        extra = (EMPTY_WINDOW,)
    elif total > 0 and bound / total > MAX_COUNTER_SHARE:
        extra = (WINDOW_TOO_SHORT,)
    return WindowEnergy("counter", start, end, tuple(gpus), expected_gpus, bound, extra)


def _power_at(samples: Sequence[PowerSample], t: float) -> float:
    """Linear interpolation of a sorted series at ``t`` (inside its span)."""
    for left, right in itertools.pairwise(samples):
        if left.t_s <= t <= right.t_s:
            if right.t_s == left.t_s:
                return right.power_w
            w = (t - left.t_s) / (right.t_s - left.t_s)
            return left.power_w + w * (right.power_w - left.power_w)
    return samples[-1].power_w


def _integrate(series: Sequence[PowerSample], start: float, end: float, max_gap_s: float,
               gpu: str) -> GpuEnergy:
    if not series or series[0].t_s > start or series[-1].t_s < end:
        return GpuEnergy(gpu, None, (NOT_BRACKETED,))
    inside = [s for s in series if start < s.t_s < end]
    points = [(start, _power_at(series, start)), *((s.t_s, s.power_w) for s in inside),
              (end, _power_at(series, end))]
    # the gap rule looks at the real samples around and inside the window
    real = [s.t_s for s in series if s.t_s <= start][-1:] + [s.t_s for s in inside] + \
        [s.t_s for s in series if s.t_s >= end][:1]
    if any(b - a > max_gap_s for a, b in itertools.pairwise(real)):
        return GpuEnergy(gpu, None, (SAMPLING_GAP,))
    joules = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in
                 itertools.pairwise(points))
    return GpuEnergy(gpu, joules)


def from_power(
    samples: Sequence[PowerSample],
    start_s: float,
    end_s: float,
    expected_gpus: int,
    max_gap_s: float = 2.0,
) -> WindowEnergy:
    """The window ``[start_s, end_s]``'s energy from sampled power, per GPU (see the module's
    rule). ``max_gap_s`` is the longest gap between samples that still counts (InferenceX
    samples at 1 Hz and allows 2 s)."""
    by_gpu: dict[str, list[PowerSample]] = {}
    for s in samples:
        by_gpu.setdefault(s.gpu, []).append(s)
    gpus = tuple(
        _integrate(sorted(series, key=lambda s: s.t_s), start_s, end_s, max_gap_s, gpu)
        for gpu, series in sorted(by_gpu.items())
    )
    extra = (EMPTY_WINDOW,) if end_s <= start_s else ()
    return WindowEnergy("sampled_power", start_s, end_s, gpus, expected_gpus, 0.0, extra)


NO_GPUS = "no_gpus"  # the cluster has no GPUs to read (a CPU cluster: nvidia_smi is empty)
NVML_UNAVAILABLE = "nvml_unavailable"  # a node could not read NVML (no nvidia-ml-py, no driver)


def _edge_corrected(window: WindowEnergy, before: EnergyRead, after: EnergyRead,
                    start_s: float, end_s: float) -> WindowEnergy:
    """The counter window cut to the round ``[start_s, end_s]``: a read is taken a little before
    the round starts and a little after it ends (a process on each node: ~0.1 s, which the
    emulator's time scale multiplies), so each GPU's energy loses the power its read saw times
    that lead or lag (GPUs idle then: the round has not begun or has ended)."""
    p_before = {s.gpu: s.power_w for s in before.samples}
    p_after = {s.gpu: s.power_w for s in after.samples}
    b_at = {r.gpu: r.t_s for r in before.reads}
    a_at = {r.gpu: r.t_s for r in after.reads}
    gpus = []
    for g in window.gpus:
        if g.joules is None or g.gpu not in b_at or g.gpu not in a_at:
            gpus.append(g)
            continue
        lead = min(max(start_s - b_at[g.gpu], 0.0), max(a_at[g.gpu] - b_at[g.gpu], 0.0))
        lag = min(max(a_at[g.gpu] - end_s, 0.0), max(a_at[g.gpu] - b_at[g.gpu] - lead, 0.0))
        cut = (p_before.get(g.gpu, 0.0) * before.time_scale * lead
               + p_after.get(g.gpu, 0.0) * after.time_scale * lag)
        gpus.append(replace(g, joules=max(g.joules - cut, 0.0)))
    return replace(window, gpus=tuple(gpus), start_s=start_s, end_s=end_s)


def of_round(before: EnergyRead, after: EnergyRead, expected_gpus: int,
             start_s: float | None = None, end_s: float | None = None) -> WindowEnergy:
    """A round's energy from the reads just before and just after it (``start_s``/``end_s``:
    the round's own wall edges, to cut the reads' lead and lag: :func:`_edge_corrected`): the
    counter's difference where every GPU read has the counter at both ends, else the power read
    at each end integrated (``sampled_power``: valid only for a round within the sampling gap,
    as two samples are all there are). A cluster without GPUs is ``no_gpus``, a node that could
    not read NVML ``nvml_unavailable``: the figure is then absent, never 0."""
    problems = before.problems + after.problems
    if before.no_gpus or after.no_gpus:
        return WindowEnergy("counter", 0.0, 0.0, (), 0, 0.0, (NO_GPUS,))  # none to expect
    extra = (NVML_UNAVAILABLE,) if problems else ()
    b = {r.gpu: r for r in before.reads}
    a = {r.gpu: r for r in after.reads}
    if b and set(b) == set(a):
        step = after.step_s or before.step_s or COUNTER_STEP_S
        window = from_counter(b, a, expected_gpus, step)
        if start_s is not None and end_s is not None and window.valid:
            window = _edge_corrected(window, before, after, start_s, end_s)
    else:
        start = min((s.t_s for s in before.samples), default=0.0)
        end = max((s.t_s for s in after.samples), default=0.0)
        window = (from_power([*before.samples, *after.samples], start, end, expected_gpus)
                  if before.samples and after.samples else
                  WindowEnergy("counter", 0.0, 0.0, (), expected_gpus, 0.0, (COUNTER_MISSING,)))
    if extra:
        window = replace(window, extra_reasons=(*extra, *window.extra_reasons))
    return window
