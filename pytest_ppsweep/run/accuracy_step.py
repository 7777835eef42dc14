"""The accuracy check of a booted layout: the ``[accuracy]`` questions asked through
the server's own ``/v1/completions``, greedy, with bounded concurrency, once per boot (a point
that joins the boot gets a copy), each answer in ``accuracy/<layout>.answers.jsonl`` as it is
scored and the score in ``accuracy/<layout>.json`` (results/accuracy.py owns both).

Before the first question the plan is printed: n and why (stats/accuracytest.plan), and the
pass threshold where a reference score is known (the gate's baseline run, the run's reference
layout); after the last, the score with its Wilson interval. A bar on the layout's live status
line counts the questions answered.

Two backends:

* ``builtin``: this module's client (requests, a thread pool of ``concurrency``);
* ``lm-eval``: lm-eval's ``local-completions`` model in a subprocess
  (run/lmeval_worker.py), on a task YAML generated for the task file under
  ``accuracy/lm-eval/<layout>/`` (the questions and the shots as JSONL beside it), with
  ``tokenized_requests=False`` and no tokenizer (the server tokenizes), ``num_concurrent`` =
  ``concurrency``; its answers are scored by lm-eval's own ``regex``/``exact_match``, which
  :func:`~pytest_ppsweep.results.accuracy.score_answer` mirrors.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

import requests

from pytest_ppsweep.engine.engines import engine_of
from pytest_ppsweep.folder.runfolder import (
    LM_EVAL_ARGS,
    LM_EVAL_LOG,
    LM_EVAL_QUESTIONS,
    LM_EVAL_SAMPLES,
    LM_EVAL_SHOTS,
    LM_EVAL_TASK_YAML,
    accuracy_answers_jsonl,
    accuracy_lm_eval_dir,
)
from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
from pytest_ppsweep.results.accuracy import (
    Answer,
    LayoutAccuracy,
    append_answer,
    layout_accuracy,
    read_accuracy,
    reference_layout,
    score_answer,
    task_prompt,
)
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.live import BAR_EVERY_S, round_bar
from pytest_ppsweep.stats.accuracytest import Plan, plan, threshold

__all__ = ["AccuracyError", "AccuracyStep", "completion_body", "lm_eval_task"]

LM_EVAL_TASK = "ppsweep_accuracy"
# Run as a script by its path (never imported here: it imports lm-eval at its top).
WORKER = Path(__file__).with_name("lmeval_worker.py")
# lm-eval's API progress bar on its stderr (tqdm): "Requesting API:  45%|####5 | 9/20 [...]"
_TQDM = re.compile(r"Requesting API:.*?\|\s*(\d+)/(\d+)")
LM_EVAL_GRACE_S = 120.0  # lm-eval's own start (imports, the dataset) on top of the questions


class AccuracyError(RuntimeError):
    """The accuracy check could not run (lm-eval failed): the message says why."""


def completion_body(spec: AccuracySpec, model: str, prompt: str) -> dict[str, Any]:
    """The ``/v1/completions`` body of one question: greedy, the stop strings."""
    return {"model": model, "prompt": prompt, "max_tokens": spec.max_tokens,
            "temperature": 0.0, "stop": list(spec.stop), "stream": False}


def lm_eval_task(spec: AccuracySpec, n: int, folder: Path) -> Path:
    """lm-eval's task for the first ``n`` questions of the task file (and its shots), written
    under ``folder``: the questions and the shots as JSONL and the task YAML (written as JSON,
    which YAML reads; the names: folder/runfolder.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    questions, shots = folder / LM_EVAL_QUESTIONS, folder / LM_EVAL_SHOTS
    questions.write_text("".join(json.dumps({"prompt": t.prompt, "answer": t.answer.strip()})
                                 + "\n" for t in spec.pool[:n]), encoding="utf-8")
    shots.write_text("".join(json.dumps({"prompt": t.prompt, "answer": t.answer}) + "\n"
                             for t in spec.shots), encoding="utf-8")
    files: dict[str, str] = {"test": str(questions)}
    if spec.few_shot:
        files["train"] = str(shots)
    score = ([{"function": "regex", "regex_pattern": spec.regex, "group_select": 0},
              {"function": "take_first"}] if spec.metric == "regex" else
             [{"function": "remove_whitespace"}, {"function": "take_first"}])
    task: dict[str, Any] = {
        "task": LM_EVAL_TASK,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": files},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "prompt",
        "doc_to_target": "answer",
        "target_delimiter": " ",
        "fewshot_delimiter": "\n\n",
        "num_fewshot": spec.few_shot,
        "generation_kwargs": {"until": list(spec.stop), "max_gen_toks": spec.max_tokens,
                              "do_sample": False, "temperature": 0.0},
        "filter_list": [{"name": "score", "filter": score}],
        "metric_list": [{"metric": "exact_match", "aggregation": "mean",
                         "higher_is_better": True}],
    }
    if spec.few_shot:
        task.update({"fewshot_split": "train", "fewshot_config": {"sampler": "first_n"}})
    path = folder / LM_EVAL_TASK_YAML
    path.write_text(json.dumps(task, indent=1) + "\n", encoding="utf-8")
    return path


class _Bar:
    """The questions answered on the layout's live status line (redrawn at most every
    BAR_EVERY_S, and at the last)."""

    def __init__(self, ctx: RunContext, key: str, total: int) -> None:
        self.ctx, self.key, self.total = ctx, key, total
        self.done = self.right = 0
        self.t0 = self.drawn = time.monotonic()
        self.lock = threading.Lock()
        self._draw()

    def tick(self, done: int | None = None, right: bool | None = None) -> None:
        with self.lock:
            self.done = self.done + 1 if done is None else done
            self.right += 1 if right else 0
            now = time.monotonic()
            if now - self.drawn >= BAR_EVERY_S or self.done >= self.total:
                self._draw()

    def _draw(self) -> None:
        self.drawn = time.monotonic()
        right = f" | right {self.right}" if self.right else ""
        self.ctx.live.status(
            self.key, f"{self.key} accuracy {round_bar(self.done, self.total)} "
            f"{self.done}/{self.total}{right} | {self.drawn - self.t0:.1f} s", phase="accuracy")


class AccuracyStep:
    """The accuracy check of the layouts of one run."""

    def __init__(self, ctx: RunContext, compare_ref: Path | None = None) -> None:
        self.ctx = ctx
        self.compare_ref = compare_ref
        self._by_boot: dict[int, LayoutAccuracy] = {}  # id(service) → its check's score

    @property
    def spec(self) -> AccuracySpec:
        spec = self.ctx.sweep.accuracy
        if spec is None:
            raise AccuracyError("the sweep has no [accuracy] table")
        return spec

    def plan(self) -> Plan:
        spec = self.spec
        return plan(spec.min_drop, spec.alpha, spec.beta, len(spec.pool), spec.questions)

    def thresholds(self, config_id: str, n: int) -> list[str]:
        """What the layout must score, from what is known before it starts."""
        spec, store = self.spec, self.ctx.store.dir
        out = []
        if spec.min_score > 0:
            out.append(f"≥ min_score {100 * spec.min_score:.1f} %")
        ref_id = reference_layout(store)
        ref = read_accuracy(store, ref_id) if ref_id and ref_id != config_id else None
        if ref is not None:
            out.append(f"≥ {100 * threshold(ref.score, n, ref.n, spec.alpha):.1f} % "
                       f"(vs {ref_id}, this run's reference layout, {ref.shown()})")
        if self.compare_ref is not None:
            other = Path(self.compare_ref)
            gid = config_id if read_accuracy(other, config_id) else reference_layout(other)
            gate = read_accuracy(other, gid) if gid else None
            if gate is not None:
                out.append(f"≥ {100 * threshold(gate.score, n, gate.n, spec.alpha):.1f} % "
                           f"(vs {gid} of the baseline run {other.name}, {gate.shown()})")
        return out

    def check(self, booted: Booted) -> Path:
        """The layout's score in ``accuracy/<point>.json``: asked once per boot, copied for a
        point that joined it. Raises ``LayoutDead`` when a rank died, AccuracyError when
        lm-eval failed."""
        cfg, store = booted.config, self.ctx.store.dir
        key = id(booted.service)
        done = self._by_boot.get(key)
        if done is None:
            booted.check_alive()
            spec, the_plan = self.spec, self.plan()
            self.ctx.progress(f"{cfg.id}: accuracy ({spec.backend}, {spec.tasks_path.name}, "
                              f"{spec.few_shot}-shot, {spec.metric}): {the_plan.line()}")
            limits = self.thresholds(cfg.id, the_plan.n)
            self.ctx.progress(f"{cfg.id}: accuracy passes at "
                              + ("; ".join(limits) if limits else
                                 "any score (no reference score yet: the first layout is the "
                                 "others' reference)"))
            started = time.monotonic()
            answers_file = store / accuracy_answers_jsonl(cfg.id)
            answers_file.unlink(missing_ok=True)
            try:
                if spec.backend == "lm-eval":
                    answers, extra = self._lm_eval(booted, the_plan.n), {"lm_eval": True}
                else:
                    answers, extra = self._builtin(booted, the_plan.n), {}
            finally:
                self.ctx.live.end(cfg.id)
            done = layout_accuracy(spec, the_plan, cfg.id, answers, boot_of=booted.boot_id,
                                   seconds=time.monotonic() - started, extra=extra)
            self._by_boot = {key: done}  # one boot is up at a time
            booted.check_alive()
            low, high = done.interval
            self.ctx.progress(
                f"{cfg.id}: accuracy {100 * done.score:.1f} % ({done.correct}/{done.n}), 95 % "
                f"Wilson interval [{100 * low:.1f}, {100 * high:.1f}]"
                + (f", {done.errors} failed" if done.errors else "")
                + f" ({done.seconds:.1f} s)")
        else:
            src = store / accuracy_answers_jsonl(done.config_id)
            if done.config_id != cfg.id and src.is_file():
                (store / accuracy_answers_jsonl(cfg.id)).write_bytes(src.read_bytes())
        return replace(done, config_id=cfg.id).write(store)

    # -- builtin --------------------------------------------------------------------------------

    def _builtin(self, booted: Booted, n: int) -> list[Answer]:
        spec, cfg, store = self.spec, booted.config, self.ctx.store.dir
        path = engine_of(cfg.engine).endpoints.completions
        url = f"{booted.service.target_url}{path}"
        model = self.ctx.sweep.model_path
        questions = spec.pool[:n]
        bar = _Bar(self.ctx, cfg.id, n)

        def ask(index: int, question: Task) -> Answer:
            body = completion_body(spec, model, task_prompt(spec.shots, question))
            try:
                resp = requests.post(url, json=body, timeout=spec.timeout_s)
            except requests.RequestException as exc:
                return Answer(index, "", "", False, f"{path} failed: {exc}")
            if resp.status_code != 200:
                return Answer(index, "", "", False, f"{path} answered HTTP "
                                                    f"{resp.status_code}: {resp.text[:300]}")
            try:
                text = str(resp.json()["choices"][0]["text"])
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                return Answer(index, "", "", False, f"unreadable answer: {exc}: "
                                                    f"{resp.text[:200]}")
            got, right = score_answer(spec, text, question.answer)
            return Answer(index, text, got, right)

        answers: list[Answer] = []
        with ThreadPoolExecutor(max_workers=min(spec.concurrency, n)) as pool:
            futures = [pool.submit(ask, i, q) for i, q in enumerate(questions)]
            for future in as_completed(futures):
                answer = future.result()
                append_answer(store, cfg.id, answer)  # as produced
                answers.append(answer)
                bar.tick(right=answer.correct)
        return sorted(answers, key=lambda a: a.index)

    # -- lm-eval --------------------------------------------------------------------------------

    def _lm_eval(self, booted: Booted, n: int) -> list[Answer]:
        spec, cfg, store = self.spec, booted.config, self.ctx.store.dir
        folder = store / accuracy_lm_eval_dir(cfg.id)
        task_file = lm_eval_task(spec, n, folder)
        out = folder / LM_EVAL_SAMPLES
        out.unlink(missing_ok=True)
        args = {
            "task_dir": str(task_file.parent), "task": LM_EVAL_TASK, "out": str(out),
            "model_args": {
                "base_url": f"{booted.service.target_url}"
                            f"{engine_of(cfg.engine).endpoints.completions}",
                "model": self.ctx.sweep.model_path,
                "num_concurrent": spec.concurrency,
                "max_retries": 3,
                "tokenized_requests": False,
                "tokenizer_backend": "none",
                "max_gen_toks": spec.max_tokens,
                "timeout": int(max(1, spec.timeout_s)),
            },
        }
        args_file = folder / LM_EVAL_ARGS
        args_file.write_text(json.dumps(args, indent=1) + "\n", encoding="utf-8")
        bar = _Bar(self.ctx, cfg.id, n)
        log = folder / LM_EVAL_LOG
        bound = LM_EVAL_GRACE_S + spec.timeout_s * (n / max(1, spec.concurrency) + 1)
        with tempfile.TemporaryDirectory(prefix="ppsweep-lmeval-") as home:
            env = {**os.environ, "HF_HOME": home, "HF_DATASETS_OFFLINE": "1",
                   "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
            with log.open("w", encoding="utf-8") as log_fh:
                proc = subprocess.Popen(
                    [sys.executable, str(WORKER), str(args_file)],
                    stdout=log_fh, stderr=subprocess.PIPE, env=env, cwd=str(folder))
                assert proc.stderr is not None
                reader = threading.Thread(target=self._follow, args=(proc.stderr, log_fh, bar),
                                          daemon=True)
                reader.start()
                try:
                    code = proc.wait(timeout=bound)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    raise AccuracyError(f"{cfg.id}: lm-eval did not finish within {bound:.0f} s "
                                        f"(its log: {log})") from None
                finally:
                    reader.join(timeout=10)
        if code != 0 or not out.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace")[-1500:]
            raise AccuracyError(f"{cfg.id}: lm-eval exited {code} (its log: {log}):\n{tail}")
        data = json.loads(out.read_text(encoding="utf-8"))
        answers = []
        for s in sorted(data["samples"], key=lambda s: int(s["doc_id"])):
            # lm-eval's own scoring decides (score_answer mirrors it for the builtin backend)
            answer = Answer(int(s["doc_id"]), str(s["completion"]), str(s["extracted"]),
                            float(s["exact_match"]) >= 1.0)
            append_answer(store, cfg.id, answer)
            answers.append(answer)
        bar.tick(done=len(answers))
        return answers

    @staticmethod
    def _follow(stream: Any, log_fh: Any, bar: _Bar) -> None:
        """lm-eval's stderr into its log, its request bar onto the layout's status line."""
        buf = b""
        while True:
            chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(4096)
            if not chunk:
                break
            buf += chunk
            parts = re.split(rb"[\r\n]", buf)
            buf = parts.pop()
            for part in parts:
                line = part.decode("utf-8", errors="replace")
                if not line.strip():
                    continue
                log_fh.write(line + "\n")
                m = _TQDM.search(line)
                if m:
                    bar.tick(done=int(m.group(1)))
        if buf:
            log_fh.write(buf.decode("utf-8", errors="replace") + "\n")
        log_fh.flush()
