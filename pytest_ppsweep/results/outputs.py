"""What a layout computes: the outputs probe's file and the one rule for when two layouts (or
two images) agree.

The probe (run/outputs_step.py) sends each prompt of ``[correctness]`` with greedy sampling
and ``return_logprob``; ``outputs/<layout>.json`` keeps, per prompt, the output token ids, the
logprob of each and the top logprobs of each position (SGLang's ``meta_info``
``output_token_logprobs`` and ``output_top_logprobs``).

**The rule** (:func:`compare_prompt`), per prompt, position by position over the shorter output:

1. the same token at a position: its logprobs must be within ``logprob_tolerance`` (nats,
   absolute); else the layouts disagree at that position;
2. another token at a position: allowed only after a *near-tie*, where either side's top-1 and
   top-2 logprobs are less than ``tie_margin`` apart *and* each side's token is among the other
   side's top logprobs of that position; the outputs then diverge legitimately and the rest of
   the prompt is not compared. Any other token difference is a disagreement.

Tolerance: 0.1 nats by default. SGLang compares bf16 models' logprobs with HuggingFace's at 5e-2
(prefill) and 6e-2 (decode) (``prefill_tolerance``/``decode_tolerance`` of ``ModelCase`` in
SGLang's test/srt/models/test_generation_models.py); fp8 GEMMs move logprobs more, hence the
headroom. The divergence rule is vLLM's ``check_logprobs_close`` (tests/models/utils.py: where
greedy tokens differ each must be in the other's top logprobs, and comparison stops there, the
sequences having diverged), tightened by the tie margin: a flip is only accepted where the two
candidates were within ``2 × tolerance`` of each other, the most two sides each off by the
tolerance can move them. Both are ``[correctness]`` keys (matrix/correctnessspec.py).

**The references.** In a sweep, every layout is compared with the sweep's baseline layout, or,
while the baseline has no outputs in the run folder yet, with the first layout in sweep order
that has them (the reference itself compares with nothing). Under ``--ppsweep-compare`` a layout
is compared also with the reference run's outputs of the same layout, else of that run's
reference layout: parallelism must not change outputs, so any of them will do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import OUTPUTS_DIR, RunFolder, RunKey

__all__ = [
    "FORMAT",
    "OUTPUTS_DIR",
    "Disagreement",
    "LayoutOutputs",
    "PromptOutput",
    "baseline_and_order",
    "compare_layouts",
    "compare_prompt",
    "outputs_file",
    "outputs_problems",
    "read_outputs",
    "reference_layout",
]

# The run folder's outputs: one file per layout (run folder file names: kept in this constant).
FORMAT = "ppsweep-outputs/1"


def outputs_file(run_dir: Path, config_id: str) -> Path:
    """``outputs/<layout>.json`` of a run folder."""
    return Path(run_dir) / OUTPUTS_DIR / f"{config_id}.json"


@dataclass(frozen=True)
class PromptOutput:
    """One prompt's greedy answer: token ids, the logprob of each, and per position the top
    logprobs as (token id, logprob), best first."""

    prompt: str | tuple[int, ...]
    ids: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    top: tuple[tuple[tuple[int, float], ...], ...]
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt if isinstance(self.prompt, str) else list(self.prompt),
            "output_ids": list(self.ids),
            "logprobs": list(self.logprobs),
            "top_logprobs": [[[t, lp] for t, lp in pos] for pos in self.top],
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PromptOutput:
        prompt = data.get("prompt", "")
        return cls(
            prompt=prompt if isinstance(prompt, str) else tuple(int(t) for t in prompt),
            ids=tuple(int(t) for t in data.get("output_ids") or ()),
            logprobs=tuple(None if v is None else float(v) for v in data.get("logprobs") or ()),
            top=tuple(tuple((int(t), float(lp)) for t, lp in pos or ())
                      for pos in data.get("top_logprobs") or ()),
            error=str(data.get("error") or ""),
        )


@dataclass(frozen=True)
class LayoutOutputs:
    """``outputs/<layout>.json``: a layout's answers and the tolerances it is judged with."""

    config_id: str
    prompts: tuple[PromptOutput, ...]
    logprob_tolerance: float
    tie_margin: float
    boot_of: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "config_id": self.config_id,
            "boot_of": self.boot_of or self.config_id,
            "logprob_tolerance": self.logprob_tolerance,
            "tie_margin": self.tie_margin,
            "prompts": [p.to_json() for p in self.prompts],
        }

    def write(self, run_dir: Path) -> Path:
        path = outputs_file(run_dir, self.config_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path


def read_outputs(run_dir: Path, config_id: str) -> LayoutOutputs | None:
    """A layout's outputs, None when the run folder has none (or an unreadable file)."""
    path = outputs_file(run_dir, config_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return LayoutOutputs(
        config_id=str(data.get("config_id", config_id)),
        prompts=tuple(PromptOutput.from_json(p) for p in data.get("prompts") or ()),
        logprob_tolerance=float(data.get("logprob_tolerance", 0.1)),
        tie_margin=float(data.get("tie_margin", 0.2)),
        boot_of=str(data.get("boot_of", "")),
    )


def shown_prompt(prompt: str | tuple[int, ...], limit: int = 60) -> str:
    """A prompt in a message: its text quoted, or its first token ids."""
    if isinstance(prompt, str):
        return repr(prompt if len(prompt) <= limit else prompt[:limit] + "…")
    ids = ", ".join(str(t) for t in prompt[:12])
    return f"ids [{ids}{', …' if len(prompt) > 12 else ''}]"


def _lp(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


@dataclass(frozen=True)
class Disagreement:
    """The first position where a prompt's outputs disagree, with both sides' token and
    logprob."""

    prompt: str | tuple[int, ...]
    index: int  # the prompt's index in the probe
    position: int
    ref_token: int
    token: int
    ref_logprob: float | None
    logprob: float | None
    why: str

    def message(self, config_id: str, reference: str) -> str:
        return (f"{config_id}: prompt {self.index} {shown_prompt(self.prompt)}: first differing "
                f"position {self.position}: token {self.token} (logprob {_lp(self.logprob)}) "
                f"vs token {self.ref_token} (logprob {_lp(self.ref_logprob)}) in {reference}: "
                f"{self.why}")


def _gap(top: Sequence[tuple[int, float]]) -> float | None:
    """Top-1 minus top-2 logprob of a position (None: fewer than two known)."""
    values = sorted((lp for _, lp in top), reverse=True)
    return values[0] - values[1] if len(values) >= 2 else None


def _at(seq: Sequence[Any], i: int) -> Any:
    return seq[i] if i < len(seq) else None


def compare_prompt(ref: PromptOutput, got: PromptOutput, index: int, *, tolerance: float,
                   tie_margin: float) -> Disagreement | None:
    """The first disagreement of ``got`` with ``ref`` under the module's rule; None when they
    agree (up to a legitimate divergence after a near-tie)."""
    for pos in range(min(len(ref.ids), len(got.ids))):
        r, g = ref.ids[pos], got.ids[pos]
        r_lp, g_lp = _at(ref.logprobs, pos), _at(got.logprobs, pos)
        if r == g:
            if r_lp is not None and g_lp is not None and abs(r_lp - g_lp) > tolerance:
                return Disagreement(ref.prompt, index, pos, r, g, r_lp, g_lp,
                                    f"same token, logprobs {abs(r_lp - g_lp):.4f} apart > "
                                    f"tolerance {tolerance:g} nats")
            continue
        r_top, g_top = _at(ref.top, pos) or (), _at(got.top, pos) or ()
        gaps = [x for x in (_gap(r_top), _gap(g_top)) if x is not None]
        tie = bool(gaps) and min(gaps) < tie_margin
        contained = g in {t for t, _ in r_top} and r in {t for t, _ in g_top}
        if tie and contained:
            return None  # a near-tie flipped: the sequences diverge from here, legitimately
        ref_gap = _gap(r_top)
        why = (f"the reference's top-1 − top-2 {ref_gap:.4f} ≥ tie margin {tie_margin:g} nats: "
               "not a near-tie"
               if not tie and ref_gap is not None else
               "not a near-tie" if not tie else
               "near-tie, but the tokens are not in each other's top logprobs")
        return Disagreement(ref.prompt, index, pos, r, g, r_lp, g_lp, why)
    return None


def compare_layouts(ref: LayoutOutputs, got: LayoutOutputs, reference: str) -> list[str]:
    """Every prompt of ``got`` that disagrees with the same prompt of ``ref`` (one line each,
    its first differing position); prompts the reference did not send are not compared.
    ``got``'s tolerances decide."""
    by_prompt = {p.prompt: p for p in ref.prompts if not p.error}
    lines = []
    for index, mine in enumerate(got.prompts):
        theirs = by_prompt.get(mine.prompt)
        if theirs is None or mine.error:
            continue
        d = compare_prompt(theirs, mine, index, tolerance=got.logprob_tolerance,
                           tie_margin=got.tie_margin)
        if d is not None:
            lines.append(d.message(got.config_id, reference))
    return lines


def baseline_and_order(run_dir: Path) -> tuple[str, list[str]]:
    """The baseline layout and the sweep order, from run.json."""
    data = RunFolder(run_dir).read_run_json()
    order = [str(c) for c in data.get(RunKey.ORDER) or []]
    return str(data.get(RunKey.BASELINE) or ""), order


def reference_layout(run_dir: Path) -> str | None:
    """The layout every other layout of the run is compared with: the baseline when it has
    outputs, else the first layout in sweep order that has them (None: no layout has)."""
    folder = Path(run_dir) / OUTPUTS_DIR
    have = {p.stem for p in folder.glob("*.json")} if folder.is_dir() else set()
    if not have:
        return None
    baseline, order = baseline_and_order(run_dir)
    for cid in [baseline, *order, *sorted(have)]:
        if cid and cid in have:
            return cid
    return None


def outputs_problems(run_dir: Path, config_id: str, compare_ref: Path | None = None) -> list[str]:
    """Why ``config_id``'s outputs do not agree: a prompt the probe could not run, a
    disagreement with the run's reference layout, and (``compare_ref``) with the gate's
    reference run. Each names the prompt, the first differing position, both tokens and both
    logprobs; empty when everything agrees."""
    mine = read_outputs(run_dir, config_id)
    if mine is None:
        return [f"{config_id}: no outputs recorded ({outputs_file(run_dir, config_id)})"]
    problems = [f"{config_id}: prompt {i} {shown_prompt(p.prompt)}: {p.error}"
                for i, p in enumerate(mine.prompts) if p.error]
    ref_id = reference_layout(run_dir)
    if ref_id is not None and ref_id != config_id:
        ref = read_outputs(run_dir, ref_id)
        if ref is not None:
            problems += compare_layouts(ref, mine, f"{ref_id} (this run's reference layout)")
    if compare_ref is not None:
        other = Path(compare_ref)
        gate_id = config_id if outputs_file(other, config_id).is_file() else reference_layout(
            other)
        gate = read_outputs(other, gate_id) if gate_id is not None else None
        if gate is not None:
            problems += compare_layouts(gate, mine, f"{gate_id} of the reference run "
                                                    f"{other.name}")
    return problems
