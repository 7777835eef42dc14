"""The [accuracy] table of the sweep file and its task file: what it reads, and every mistake
naming the file, the key (or the task file's line), what was expected and what was found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.matrices import seed_text
from support.paths import REPO

from pytest_ppsweep.matrix import accuracyspec
from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load

SEED = REPO / "test_matrix" / "ppsweep.toml"
LINES = [{"prompt": f"Q{i}: 2+{i}=", "answer": str(2 + i)} for i in range(10)]


def _sweep(tmp_path: Path, table: str, lines: list[object] | str | None = None) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    if isinstance(lines, str):
        tasks.write_text(lines)
    else:
        tasks.write_text("".join(json.dumps(x) + "\n" for x in (LINES if lines is None else lines)))
    path = tmp_path / "ppsweep.toml"
    path.write_text(seed_text() + "\n[accuracy]\n" + table)
    return path


def test_defaults_and_the_task_file_relative_to_the_sweep(tmp_path: Path) -> None:
    spec = load(_sweep(tmp_path, 'tasks = "tasks.jsonl"\n')).accuracy
    assert spec is not None
    assert spec.tasks_path == tmp_path / "tasks.jsonl" and len(spec.tasks) == 10
    assert spec.tasks[3] == accuracyspec.Task("Q3: 2+3=", "5")
    assert (spec.metric, spec.few_shot, spec.questions, spec.backend) == (
        "exact", 0, None, "builtin")
    assert (spec.min_drop, spec.alpha, spec.beta, spec.min_score) == (0.03, 0.05, 0.2, 0.0)
    assert spec.stop == ("\n",) and spec.concurrency == 8
    assert load(SEED).accuracy is None  # no table: no accuracy check, no test_accuracy


def test_every_key(tmp_path: Path) -> None:
    spec = load(_sweep(tmp_path, 'tasks = "tasks.jsonl"\nmetric = "regex"\n'
                                 'regex = "= *(\\\\d+)"\nfew_shot = 2\nquestions = 5\n'
                                 'min_drop = 10\nalpha = 0.01\nbeta = 0.1\nmin_score = 50\n'
                                 'max_tokens = 4\nstop = ["\\n", "Q"]\nconcurrency = 2\n'
                                 'timeout_s = 9\n')).accuracy
    assert spec is not None
    assert spec.metric == "regex" and spec.regex == "= *(\\d+)"
    assert spec.shots == tuple(accuracyspec.Task(**x) for x in LINES[:2])  # type: ignore[arg-type]
    assert len(spec.pool) == 8 and spec.pool[0].prompt == "Q2: 2+2="
    assert (spec.questions, spec.min_drop, spec.alpha, spec.beta) == (5, 0.1, 0.01, 0.1)
    assert spec.min_score == 0.5 and spec.stop == ("\n", "Q") and spec.max_tokens == 4


@pytest.mark.parametrize(
    ("table", "lines", "message"),
    [("", None, "key 'accuracy.tasks': expected a value (required), found nothing"),
     ('tasks = "missing.jsonl"\n', None, "key 'accuracy.tasks': expected a readable UTF-8 JSONL"),
     ('tasks = "tasks.jsonl"\n', '{"prompt": "a", "answer": "b"}\nnot json\n',
      "tasks.jsonl line 2: expected a JSON object, found 'not json'"),
     ('tasks = "tasks.jsonl"\n', [["a", "b"]], "line 1: expected a JSON object, found"),
     ('tasks = "tasks.jsonl"\n', [{"prompt": "a"}],
      "line 1: key 'answer': expected a string, found None"),
     ('tasks = "tasks.jsonl"\n', [{"prompt": "", "answer": "x"}],
      "line 1: key 'prompt': expected a non-empty string"),
     ('tasks = "tasks.jsonl"\n', "\n\n", "expected a task file with at least one question"),
     ('tasks = "tasks.jsonl"\nmetric = "fuzzy"\n', None,
      "key 'accuracy.metric': expected one of 'exact', 'regex', found str 'fuzzy'"),
     ('tasks = "tasks.jsonl"\nmetric = "regex"\n', None,
      "key 'accuracy.regex': expected a regular expression"),
     ('tasks = "tasks.jsonl"\nmetric = "regex"\nregex = "("\n', None,
      "key 'accuracy.regex': expected a valid regular expression, found '('"),
     ('tasks = "tasks.jsonl"\nregex = "x"\n', None, "expected no regex with metric = \"exact\""),
     ('tasks = "tasks.jsonl"\nfew_shot = 10\n', None,
      "key 'accuracy.few_shot': expected fewer shots than the task file's 10 lines"),
     ('tasks = "tasks.jsonl"\nfew_shot = 2\nquestions = 9\n', None,
      "key 'accuracy.questions': expected at most the 8 questions"),
     ('tasks = "tasks.jsonl"\nquestions = 0\n', None,
      "key 'accuracy.questions': expected a value ≥ 1"),
     ('tasks = "tasks.jsonl"\nalpha = 0.5\n', None,
      "key 'accuracy.alpha': expected a rate in (0, 0.5)"),
     ('tasks = "tasks.jsonl"\nbeta = 0\n', None,
      "key 'accuracy.beta': expected a rate in (0, 0.5)"),
     ('tasks = "tasks.jsonl"\nmin_drop = 0\n', None,
      "key 'accuracy.min_drop': expected a value ≥ 0.1"),
     ('tasks = "tasks.jsonl"\nmin_score = 101\n', None,
      "key 'accuracy.min_score': expected points"),
     ('tasks = "tasks.jsonl"\nbackend = "vllm"\n', None,
      "key 'accuracy.backend': expected one of 'builtin', 'lm-eval', found str 'vllm'"),
     ('tasks = "tasks.jsonl"\nstop = [""]\n', None, "key 'accuracy.stop': expected non-empty"),
     ('tasks = "tasks.jsonl"\nshots = 2\n', None, "unknown key 'accuracy.shots'"),
     ('tasks = "tasks.jsonl"\nconcurrency = 0\n', None, "key 'accuracy.concurrency'")],
)
def test_mistakes_name_file_key_expected_and_found(
        tmp_path: Path, table: str, lines: list[object] | str | None, message: str) -> None:
    path = _sweep(tmp_path, table, lines)
    with pytest.raises(MatrixError) as err:
        load(path)
    assert str(path) in str(err.value) and message in str(err.value), str(err.value)


def test_lm_eval_backend_refused_before_launch_when_not_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``backend = "lm-eval"`` without the package: a clear error when the sweep file is read,
    before anything launches."""
    real = accuracyspec.importlib.util.find_spec
    monkeypatch.setattr(accuracyspec.importlib.util, "find_spec",
                        lambda name, *a: None if name == "lm_eval" else real(name, *a))
    path = _sweep(tmp_path, 'tasks = "tasks.jsonl"\nbackend = "lm-eval"\n')
    with pytest.raises(MatrixError) as err:
        load(path)
    assert "key 'accuracy.backend'" in str(err.value)
    assert "lm-eval" in str(err.value) and "not installed" in str(err.value)
    assert "pip install 'lm-eval[api]'" in str(err.value)
