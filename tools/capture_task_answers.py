"""Make a task file's answers a model's own greedy answers, from a run that asked it.

    python tools/capture_task_answers.py RUN_DIR LAYOUT TASKS.jsonl

A random tiny model cannot do a real task, so the real-SGLang accuracy tests use a task file
whose answers are the model's own greedy answers: run the sweep once with the file (any
answers), then this rewrites every question's answer in TASKS.jsonl with what LAYOUT answered
in RUN_DIR (accuracy/<layout>.answers.jsonl: the completion cut at the stop strings and
stripped, as scored). The shots (the lines before the questions asked) are kept: pass the
same file the run used, whose every question was asked. test_matrix/cpu_tasks.jsonl was made
so, from tiny-qwen3moe on PP2/TP2 (cpu.toml's [accuracy]).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pytest_ppsweep.folder.runfolder import accuracy_answers_jsonl
from pytest_ppsweep.matrix.accuracyspec import read_tasks


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    run, layout, tasks_path = Path(argv[1]), argv[2], Path(argv[3])
    answers = {}
    for line in (run / accuracy_answers_jsonl(layout)).read_text(encoding="utf-8").splitlines():
        a = json.loads(line)
        if a.get("error"):
            raise SystemExit(f"question {a['index']} was not answered: {a['error']}")
        answers[int(a["index"])] = str(a["extracted"])
    tasks = read_tasks(tasks_path, str(tasks_path))
    shots = len(tasks) - len(answers)
    if shots < 0 or sorted(answers) != list(range(len(answers))):
        raise SystemExit(f"{run}: {len(answers)} answers do not fit the {len(tasks)} lines of "
                         f"{tasks_path}")
    lines = [{"prompt": t.prompt, "answer": t.answer if i < shots else answers[i - shots]}
             for i, t in enumerate(tasks)]
    tasks_path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    print(f"{tasks_path}: {len(answers)} answers from {layout} of {run.name} "
          f"({shots} shots kept)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
