"""The accuracy check end to end on the emulator (issue 40.2): the emulator answers a greedy
``/v1/completions`` deterministically from the prompt, so a task file whose answers are its own
greedy completions scores 100 % on a sound layout; the ``corrupt_stage`` fault changes every
answer of a layout with that stage. A corrupted layout fails test_accuracy against the run's
reference layout, and a corrupted image fails it against the baseline run (the gate); the
messages name both scores with their intervals, n and the threshold."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.matrices import CONFIGS
from support.outcomes import outcomes

from pytest_ppsweep.matrix.accuracyspec import Task
from pytest_ppsweep.results.accuracy import task_prompt
from pytest_ppsweep.sim.model import greedy
from pytest_ppsweep.sim.model.engine import token_text
from pytest_ppsweep.sim.model.profile import load_profile

MAX_TOKENS = 3
SHOTS = 2
QUESTIONS = 10


def emulator_answer(prompt: str) -> str:
    """What the emulator answers a greedy ``/v1/completions`` of ``prompt`` (sound layout)."""
    vocab = load_profile().model.vocab_size
    out = greedy.generate(greedy.prompt_seed(prompt, None), MAX_TOKENS, vocab, 1)
    return "".join(token_text(tid) for tid, _, _ in out).strip()


def task_file(folder: Path) -> Path:
    """Two shots, then ten questions whose answers are the emulator's own greedy answers of the
    full few-shot prompt."""
    shots = [Task(f"Shot {i}: say something.", f"answer {i}") for i in range(SHOTS)]
    lines = [{"prompt": s.prompt, "answer": s.answer} for s in shots]
    for i in range(QUESTIONS):
        q = f"Question {i}: continue the words."
        lines.append({"prompt": q, "answer": emulator_answer(task_prompt(shots, Task(q, "")))})
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def with_accuracy(folder: Path) -> None:
    task_file(folder)
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text() + f'\n[accuracy]\ntasks = "tasks.jsonl"\nfew_shot = {SHOTS}\n'
                    f"max_tokens = {MAX_TOKENS}\nconcurrency = 4\n"
                    "\n[correctness]\nenabled = false\n")  # accuracy alone decides here


def lines(*texts: str) -> list[str]:
    """fnmatch patterns of lines that contain each text (its ``[`` literal, not a class)."""
    return ["*" + t.replace("[", "[[]") + "*" for t in texts]


def run(pytester: pytest.Pytester, folder: Path, reports: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(str(folder), "-v", "--ppsweep-reports", str(reports),
                                         *args, timeout=600)


def test_a_corrupted_stage_fails_accuracy_and_so_does_a_corrupted_image(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    # Run 1: PP8's stage 1 computes wrong outputs; PP4 (the baseline layout) is sound.
    folder = sweep_dir(CONFIGS + 'env = { PPSWEEP_SIM_FAULTS = "corrupt_stage=1" }\n')
    with_accuracy(folder)
    reports = tmp_path / "reports"
    result = run(pytester, folder, reports, "--ppsweep-run-id", "good")
    text = result.stdout.str()
    seen = outcomes(text)
    assert seen["test_accuracy[pp4-tp8-ep4]"] == "PASSED", text[-4000:]
    assert seen["test_accuracy[pp8-tp4-ep4]"] == "FAILED", text[-4000:]
    failed = sorted(t for t, o in seen.items() if o not in ("PASSED", "SKIPPED"))
    assert failed == ["test_accuracy[pp8-tp4-ep4]"], failed  # on accuracy alone
    assert seen["test_outputs_match[pp8-tp4-ep4]"] == "SKIPPED"  # [correctness] off here
    # n and the thresholds before, the score with its interval after
    result.stdout.fnmatch_lines(lines(
        "pp4-tp8-ep4: accuracy (builtin, tasks.jsonl, 2-shot, exact): n = 10 questions (all the "
        "task file has (10); θ = 3.0 points, α = 0.05, β = 0.2 ask 3435): detects a drop of "
        "55.6 points",
        "pp4-tp8-ep4: accuracy 100.0 % (10/10), 95 % Wilson interval [72.2, 100.0]",
        "pp8-tp4-ep4: accuracy passes at ≥ 63.2 % (vs pp4-tp8-ep4, this run's reference "
        "layout, 100.0 % [72.2, 100.0] (10/10))",
        "pp8-tp4-ep4: accuracy 0.0 % [0.0, 27.8] (0/10) of n = 10 is below the threshold "
        "63.2 % against pp4-tp8-ep4 (this run's reference layout; parallelism must not change "
        "accuracy)'s 100.0 % [72.2, 100.0] (10/10) of n = 10 (one-sided α = 0.05",
    ))
    good = reports / "good"
    stored = json.loads((good / "accuracy" / "pp4-tp8-ep4.json").read_text())
    assert (stored["n"], stored["correct"], stored["backend"]) == (10, 10, "builtin")
    answers = (good / "accuracy" / "pp8-tp4-ep4.answers.jsonl").read_text().splitlines()
    assert len(answers) == 10 and not any(json.loads(a)["correct"] for a in answers)

    # Run 2: an image whose every layout is corrupted (stage 0), gated against run 1.
    toml = folder / "ppsweep.toml"
    toml.write_text(toml.read_text().replace("corrupt_stage=1", "corrupt_stage=0"))
    sim_env = "PPSWEEP_SIM_TIME_SCALE ="
    toml.write_text(toml.read_text().replace(
        sim_env, 'PPSWEEP_SIM_FAULTS = "corrupt_stage=0", ' + sim_env, 1))
    result = run(pytester, folder, reports, "--ppsweep-run-id", "bad", "--ppsweep-compare",
                 "good", "-k", "accuracy")
    text = result.stdout.str()
    seen = outcomes(text)
    assert seen["test_accuracy[pp4-tp8-ep4]"] == "FAILED", text[-4000:]
    result.stdout.fnmatch_lines(lines(
        "pp4-tp8-ep4: accuracy passes at ≥ 63.2 % (vs pp4-tp8-ep4 of the baseline run good, "
        "100.0 % [72.2, 100.0] (10/10))",
        "pp4-tp8-ep4: accuracy 0.0 % [0.0, 27.8] (0/10) of n = 10 is below the threshold "
        "63.2 % against pp4-tp8-ep4 of the baseline run good's 100.0 %",
    ))
