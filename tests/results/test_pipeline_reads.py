"""The run folder is read once per analysis: the results pipeline (results/pipeline.analyse) and
the views it feeds (report/summary.render), and the run's close (run/close.close: benchmark.json,
summary.csv, answers.json, the history) open run.json, the SLO search's files, configs.csv and
every point's manifest once each; the readers after the first get what it read (RunData.run_json,
RunData.files, Summary.manifests), not the folder.

Every ``open`` of the folder's files is counted by an audit hook in a child interpreter (an audit
hook cannot be removed, so it stays out of the test session's own process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO
from support.slo import searched

import pytest_ppsweep
from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
from pytest_ppsweep.results.accuracy import Answer, layout_accuracy
from pytest_ppsweep.stats.accuracytest import plan

STORED = REPO / "tests" / "data" / "answers"

# Counts every read of a file under the folder (argv[1]) while argv[2] runs ("analyse" or
# "close"), printed as {relative path: opens}.
COUNT = r"""
import collections, json, os, sys
from pathlib import Path
from typing import Any
run = Path(sys.argv[1])
counts = collections.Counter()
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path, mode = os.fsdecode(args[0]), str(args[1] if len(args) > 1 else "r")
        if path.startswith(f"{run}/") and not set(mode) & set("wax+"):
            counts[path[len(str(run)) + 1:]] += 1
from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.report.summary import render
from pytest_ppsweep.results.pipeline import analyse
from pytest_ppsweep.run.close import close
sys.addaudithook(hook)
if sys.argv[2] == "analyse":
    analysis, note = analyse(run), ""
else:
    closed = close(RunStore(run.parent, run.name), [], {}, None, {})
    analysis, note = closed.analysis, closed.note
rendered = render(run, analysis, note)
assert analysis is not None and any("SLO searches" in line for line in rendered.terminal)
print(json.dumps(counts))
"""


def _reads(run: Path, step: str) -> dict[str, int]:
    # the child imports the package this session imports (not the one its working directory has)
    path = [str(Path(pytest_ppsweep.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    done = subprocess.run([sys.executable, "-c", COUNT, str(run), step], capture_output=True,
                          text=True, timeout=120, check=False, cwd=run.parent, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    counts: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return counts


@pytest.mark.parametrize("step", ["analyse", "close"])
def test_each_file_of_the_folder_is_read_once(tmp_path: Path, step: str) -> None:
    """The seeds' sweep (five layouts, PP16's confounded step: the answers read the manifests)
    with two SLO searches, analysed and rendered; or closed (benchmark.json and the history
    too) and rendered."""
    run = tmp_path / "reports" / "ppsweep"
    shutil.copytree(STORED / "ppsweep", run)
    searched(run, "pp8-tp4-ep4", 0.45, 0.6)
    searched(run, "pp4-tp8-ep4", 0.2, 0.3)
    # two layouts' task scores and one profile window: the accuracy and profile views read
    # what FolderFiles read, not the folder (the accuracy table's rule reads every score)
    spec = AccuracySpec(tasks_path=tmp_path / "t.jsonl", tasks=(Task("q", "a"),))
    for cid, right in (("pp8-tp4-ep4", 19), ("pp4-tp8-ep4", 18)):
        layout_accuracy(spec, plan(0.03, 0.05, 0.2, 20), cid,
                        [Answer(i, "", "", i < right) for i in range(20)]).write(run)
    window = run / "profile" / "pp8-tp4-ep4" / "attribution.json"
    window.parent.mkdir(parents=True)
    window.write_text(json.dumps({"calls": {}, "cumulative_ms": {}, "p50_ms": {},
                                  "compute_share": 0.7, "exposed_share": 0.2,
                                  "idle_share": 0.1}))
    reads = _reads(run, step)
    once = ["metadata/run.json", "configs.csv", "slo_probes.csv", "slo/pp8-tp4-ep4.json",
            "slo/pp4-tp8-ep4.json", "accuracy/pp8-tp4-ep4.json", "accuracy/pp4-tp8-ep4.json",
            "profile/pp8-tp4-ep4/attribution.json",
            *(f"metadata/{p.name}" for p in sorted((run / "metadata").glob("*.manifest.json")))]
    assert len(once) == 13
    assert {name: reads.get(name, 0) for name in once} == dict.fromkeys(once, 1)
    # results.csv: one read for the frame and the views' rows (the SLO Pareto front's points);
    # the close first sorts the file in place, which reads it once more
    assert reads.get("results.csv", 0) == (1 if step == "analyse" else 2), reads
    assert reads.get("planner/profile.json", 0) <= 1


def test_the_n_of_n_rule_is_computed_once_per_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts and the answers of one analysis share which rounds count: analyse computes
    it once and hands it to both (no module-level memo keyed on the frame)."""
    from pytest_ppsweep.results import aggregate, pipeline, questions, verdict

    calls: list[int] = []

    def counting(results: Any) -> Any:
        calls.append(len(results))
        return aggregate.round_counts(results)

    for module in (pipeline, verdict, questions):
        monkeypatch.setattr(module, "round_counts", counting)
    _, _, verdicts, answers = pipeline.analyse(STORED / "a2a")
    assert verdicts and answers
    assert len(calls) == 1
