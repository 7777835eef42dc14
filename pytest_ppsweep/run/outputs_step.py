"""The outputs probe of a booted layout (issue 40.1): the ``[correctness]`` prompts sent to
``/generate`` with greedy sampling and ``return_logprob``, stored in ``outputs/<layout>.json``
(results/outputs.py owns the file and the rule that compares it).

One probe per boot: the points that share a boot (run/boots.py) get a copy of its outputs under
their own id. The prompts go at once (a thread each), so the probe costs about one request of
``max_new_tokens`` tokens (benchmarks/bench_correctness_probe.py measures it against a layout's
time).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import requests

from pytest_ppsweep.matrix.correctnessspec import CorrectnessSpec, Prompt
from pytest_ppsweep.results.outputs import LayoutOutputs, PromptOutput
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext

__all__ = ["OutputsStep", "generate_body", "prompt_output"]


def generate_body(spec: CorrectnessSpec, prompt: Prompt) -> dict[str, Any]:
    """SGLang's ``/generate`` body of one probe prompt: greedy, ``ignore_eos`` (every layout
    answers ``max_new_tokens`` tokens), the output's logprobs only (``logprob_start_len`` -1)
    with ``top_logprobs_num`` per position, token ids rather than texts."""
    body: dict[str, Any] = {"text": prompt} if isinstance(prompt, str) else {
        "input_ids": list(prompt)}
    body.update({
        "sampling_params": {"temperature": 0.0, "max_new_tokens": spec.max_new_tokens,
                            "ignore_eos": True},
        "return_logprob": True,
        "logprob_start_len": -1,
        "top_logprobs_num": spec.top_logprobs,
        "return_text_in_logprobs": False,
        "stream": False,
        "log_metrics": False,  # not a measured request: the server's counters stay the rounds'

    })
    return body


def prompt_output(prompt: Prompt, answer: Any) -> PromptOutput:
    """A ``/generate`` answer → the prompt's outputs. SGLang 0.5.23's ``meta_info``
    (tokenizer_manager.py ``add_logprob_to_meta_info``): ``output_token_logprobs`` is a list of
    ``[logprob, token_id, text|null]``, ``output_top_logprobs`` a list per position of such
    lists (or null); ``output_ids`` the generated ids."""
    if not isinstance(answer, dict) or not isinstance(answer.get("meta_info"), dict):
        return PromptOutput(prompt, (), (), (), f"unexpected answer: {str(answer)[:200]}")
    meta = answer["meta_info"]
    tokens = meta.get("output_token_logprobs") or []
    ids = [int(t[1]) for t in tokens] or [int(t) for t in answer.get("output_ids") or []]
    logprobs = [None if t[0] is None else float(t[0]) for t in tokens]
    top = tuple(
        tuple(sorted(((int(e[1]), float(e[0])) for e in pos or () if e[0] is not None),
                     key=lambda x: -x[1]))
        for pos in meta.get("output_top_logprobs") or ()
    )
    return PromptOutput(prompt, tuple(ids), tuple(logprobs), top)


class OutputsStep:
    """The outputs probe of the layouts of one run."""

    def __init__(self, ctx: RunContext) -> None:
        """The probe's cluster time is its test's: the session counts the call of every test
        that uses the service (session/owner.py ``record``), so it is not added here again."""
        self.sweep = ctx.sweep
        self.store = ctx.store
        self.progress = ctx.progress
        self._by_boot: dict[int, LayoutOutputs] = {}  # id(service) → its probe's outputs

    @property
    def spec(self) -> CorrectnessSpec:
        return self.sweep.correctness

    def probe(self, booted: Booted) -> Path:
        """The probe's outputs of ``booted``'s point in ``outputs/<point>.json``: sent once per
        boot, copied for a point that joined it. Raises ``LayoutDead`` when a rank died."""
        cfg = booted.config
        key = id(booted.service)
        done = self._by_boot.get(key)
        if done is None:
            booted.check_alive()
            started = time.monotonic()
            done = self._send(booted)
            self._by_boot = {key: done}  # one boot is up at a time
            booted.check_alive()
            bad = sum(1 for p in done.prompts if p.error)
            self.progress(f"{cfg.id}: outputs probe: {len(done.prompts)} prompts × "
                          f"{self.spec.max_new_tokens} tokens, greedy"
                          + (f", {bad} failed" if bad else "")
                          + f" ({time.monotonic() - started:.2f} s)")
        return replace(done, config_id=cfg.id).write(self.store.dir)

    def _send(self, booted: Booted) -> LayoutOutputs:
        spec = self.spec
        url = f"{booted.service.base_url}/generate"

        def one(prompt: Prompt) -> PromptOutput:
            try:
                resp = requests.post(url, json=generate_body(spec, prompt),
                                     timeout=spec.timeout_s)
            except requests.RequestException as exc:
                return PromptOutput(prompt, (), (), (), f"/generate failed: {exc}")
            if resp.status_code != 200:
                return PromptOutput(prompt, (), (), (), f"/generate answered HTTP "
                                                        f"{resp.status_code}: {resp.text[:300]}")
            try:
                return prompt_output(prompt, resp.json())
            except (ValueError, TypeError, IndexError) as exc:
                return PromptOutput(prompt, (), (), (), f"unreadable answer: {exc}")

        with ThreadPoolExecutor(max_workers=len(spec.prompts)) as pool:
            outs = tuple(pool.map(one, spec.prompts))
        return LayoutOutputs(booted.config.id, outs, spec.logprob_tolerance, spec.tie_margin,
                             boot_of=booted.boot_id)
