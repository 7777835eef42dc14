"""The accuracy check (run/accuracy_step.py) against a stand-in /v1/completions that answers
each question with a fixed completion: the greedy body, bounded concurrency, once per boot (a
joining point gets a copy), the answers as produced, n and the threshold printed before and the
score with its interval after; the lm-eval backend against the same server when lm-eval is
installed (its task YAML, its local-completions model, the same score)."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from support.httpthread import serving

from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
from pytest_ppsweep.results.accuracy import accuracy_problems, read_accuracy, task_prompt
from pytest_ppsweep.run.accuracy_step import AccuracyStep
from pytest_ppsweep.run.live import NoStatus

SHOTS = (Task("1+1=", "2"),)
QUESTIONS = tuple(Task(f"{i}+{i}=", str(2 * i)) for i in range(2, 12))  # 10 questions


class _Completions(BaseHTTPRequestHandler):
    """Answers ``<right answer>\\nnoise`` to every question but those whose number is in
    ``wrong``; stop strings are applied as SGLang does."""

    bodies: ClassVar[list[dict[str, Any]]] = []
    wrong: ClassVar[set[int]] = set()
    lock = threading.Lock()
    in_flight = 0
    most = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.bodies.append(body)
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
        prompt = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
        question = prompt.rsplit("\n\n", 1)[-1]
        n = int(question.split("+")[0])
        text = f" {2 * n if n not in cls.wrong else -1}\nnoise"
        stops = body.get("stop") or []
        for s in [stops] if isinstance(stops, str) else stops:
            text = text.split(s)[0]
        data = json.dumps({"object": "text_completion", "choices": [
            {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}]}).encode()
        with cls.lock:
            cls.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Completions.bodies, _Completions.wrong, _Completions.most = [], set(), 0
    with serving(_Completions) as url:
        yield url


def _spec(tmp_path: Path, backend: str = "builtin") -> AccuracySpec:
    return AccuracySpec(tasks_path=tmp_path / "tasks.jsonl", tasks=SHOTS + QUESTIONS, few_shot=1,
                        backend=backend, max_tokens=4, concurrency=3, min_drop=0.5)


def _step(tmp_path: Path, spec: AccuracySpec, lines: list[str]) -> AccuracyStep:
    sweep: Any = SimpleNamespace(accuracy=spec, model_path="tiny")
    ctx: Any = SimpleNamespace(sweep=sweep, store=SimpleNamespace(dir=tmp_path),
                               progress=lines.append, live=NoStatus())
    return AccuracyStep(ctx)


_SERVICES: dict[tuple[str, str], Any] = {}


def _booted(url: str, cid: str, boot: str) -> Any:
    """Point ``cid`` on boot ``boot``'s service (one service object per boot)."""
    service = _SERVICES.setdefault((url, boot), SimpleNamespace(
        target_url=url, config=SimpleNamespace(id=boot, engine="sglang")))
    return SimpleNamespace(service=service, config=SimpleNamespace(id=cid, engine="sglang"),
                           boot_id=boot, check_alive=lambda: None)


def test_builtin_once_per_boot_greedy_bounded_and_printed(server: str, tmp_path: Path) -> None:
    lines: list[str] = []
    step = _step(tmp_path, _spec(tmp_path), lines)
    boot = _booted(server, "pp1", "pp1")
    step.check(boot)
    step.check(_booted(server, "pp1#decode", "pp1"))  # the same boot: a copy, no request
    assert len(_Completions.bodies) == 10 and 1 <= _Completions.most <= 3
    body = next(b for b in _Completions.bodies if b["prompt"].endswith("2+2="))
    assert body == {"model": "tiny", "prompt": "1+1= 2\n\n2+2=", "max_tokens": 4,
                    "temperature": 0.0, "stop": ["\n"], "stream": False}
    assert body["prompt"] == task_prompt(SHOTS, QUESTIONS[0])
    # n before (θ = 50 points asks 13, the file has 10), the score with its interval after
    assert "pp1: accuracy (builtin, tasks.jsonl, 1-shot, exact): n = 10 questions (all the " \
           "task file has (10); θ = 50.0 points, α = 0.05, β = 0.2 ask 13)" in lines[0]
    assert "no reference score yet" in lines[1]
    assert lines[2].startswith("pp1: accuracy 100.0 % (10/10), 95 % Wilson interval [72.2, 100.0]")
    stored = read_accuracy(tmp_path, "pp1")
    assert stored is not None and (stored.n, stored.correct, stored.boot_of) == (10, 10, "pp1")
    answers = (tmp_path / "accuracy" / "pp1.answers.jsonl").read_text().splitlines()
    assert len(answers) == 10 and all(json.loads(a)["correct"] for a in answers)
    copy = read_accuracy(tmp_path, "pp1#decode")  # the joining point's copy
    assert copy is not None and (copy.n, copy.correct, copy.boot_of) == (10, 10, "pp1")
    assert (tmp_path / "accuracy" / "pp1#decode.answers.jsonl").read_text() == "\n".join(
        answers) + "\n"


def test_a_worse_layout_fails_naming_scores_intervals_n_and_threshold(
        server: str, tmp_path: Path) -> None:
    lines: list[str] = []
    step = _step(tmp_path, _spec(tmp_path), lines)
    step.check(_booted(server, "pp1", "pp1"))
    _Completions.wrong = set(range(2, 9))  # 7 of 10 wrong on the second layout
    step.check(_booted(server, "pp2", "pp2"))
    assert any("pp2: accuracy passes at ≥ 63.2 % (vs pp1, this run's reference layout, "
               "100.0 % [72.2, 100.0] (10/10))" in line for line in lines), lines
    assert accuracy_problems(tmp_path, "pp1") == []
    problems = accuracy_problems(tmp_path, "pp2")
    assert problems == [
        "pp2: accuracy 30.0 % [10.8, 60.3] (3/10) of n = 10 is below the threshold 63.2 % "
        "against pp1 (this run's reference layout; parallelism must not change accuracy)'s "
        "100.0 % [72.2, 100.0] (10/10) of n = 10 (one-sided α = 0.05, σ = 0.5: significantly "
        "worse)"]
    # the gate: the same layout of a baseline run decides
    gate = tmp_path / "baseline"
    (gate / "accuracy").mkdir(parents=True)
    (gate / "accuracy" / "pp2.json").write_text((tmp_path / "accuracy" / "pp1.json").read_text()
                                                .replace('"config_id": "pp1"',
                                                         '"config_id": "pp2"'))
    assert any("against pp2 of the baseline run baseline's 100.0 %" in p
               for p in accuracy_problems(tmp_path, "pp2", gate))


@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm-eval not installed")
def test_lm_eval_backend_scores_as_the_builtin_one(server: str, tmp_path: Path) -> None:
    """lm-eval's local-completions model on the generated task: the same prompts reach the
    server (its few-shot format is the builtin's), and the same answers score the same."""
    lines: list[str] = []
    _Completions.wrong = {3, 5}
    step = _step(tmp_path, _spec(tmp_path, "lm-eval"), lines)
    step.check(_booted(server, "pp1", "pp1"))
    stored = read_accuracy(tmp_path, "pp1")
    assert stored is not None, lines
    assert (stored.backend, stored.n, stored.correct) == ("lm-eval", 10, 8), lines
    prompts = sorted(b["prompt"][0] if isinstance(b["prompt"], list) else b["prompt"]
                     for b in _Completions.bodies)
    assert prompts == sorted(task_prompt(SHOTS, q) for q in QUESTIONS)
    body = _Completions.bodies[0]
    assert body["temperature"] == 0 and body["max_tokens"] == 4 and body["model"] == "tiny"
    assert body["stop"] == ["\n"] and _Completions.most <= 3
    folder = tmp_path / "accuracy" / "lm-eval" / "pp1"
    assert (folder / "ppsweep_accuracy.yaml").is_file() and (folder / "lm-eval.log").is_file()
    answers = [json.loads(a) for a in
               (tmp_path / "accuracy" / "pp1.answers.jsonl").read_text().splitlines()]
    assert [a["extracted"] for a in answers if not a["correct"]] == ["-1", "-1"]
