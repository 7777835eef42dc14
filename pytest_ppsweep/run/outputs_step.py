"""The outputs probe of a booted layout: the ``[correctness]`` prompts sent to
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

from pytest_ppsweep.engine.base import Engine
from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.matrix.correctnessspec import CorrectnessSpec, Prompt
from pytest_ppsweep.results.outputs import LayoutOutputs, PromptOutput
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext

__all__ = ["OutputsStep", "generate_body", "prompt_output"]


def generate_body(spec: CorrectnessSpec, prompt: Prompt,
                  engine: Engine | None = None) -> dict[str, Any]:
    """The engine's greedy request of one probe prompt: ``spec.max_new_tokens`` tokens, the
    output's logprobs with ``spec.top_logprobs`` per position."""
    return (engine or engine_of()).greedy_request(
        prompt, max_new_tokens=spec.max_new_tokens, top_logprobs=spec.top_logprobs)


def prompt_output(prompt: Prompt, answer: Any, engine: Engine | None = None) -> PromptOutput:
    """The engine's answer to a greedy request → the prompt's outputs."""
    read = (engine or engine_of()).greedy_answer(answer)
    if isinstance(read, str):
        return PromptOutput(prompt, (), (), (), read)
    return PromptOutput(prompt, read.ids, read.logprobs, read.top)


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
        engine = engine_of(booted.config.engine)
        path = engine.endpoints.generate
        url = f"{booted.service.target_url}{path}"

        def one(prompt: Prompt) -> PromptOutput:
            try:
                resp = requests.post(url, json=generate_body(spec, prompt, engine),
                                     timeout=spec.timeout_s)
            except requests.RequestException as exc:
                return PromptOutput(prompt, (), (), (), f"{path} failed: {exc}")
            if resp.status_code != 200:
                return PromptOutput(prompt, (), (), (), f"{path} answered HTTP "
                                                        f"{resp.status_code}: {resp.text[:300]}")
            try:
                return prompt_output(prompt, resp.json(), engine)
            except (ValueError, TypeError, IndexError) as exc:
                return PromptOutput(prompt, (), (), (), f"unreadable answer: {exc}")

        with ThreadPoolExecutor(max_workers=len(spec.prompts)) as pool:
            outs = tuple(pool.map(one, spec.prompts))
        return LayoutOutputs(booted.config.id, outs, spec.logprob_tolerance, spec.tie_margin,
                             boot_of=booted.boot_id)
