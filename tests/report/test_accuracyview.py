"""The report's "Task accuracy" table (report/accuracyview.py): per layout its score, interval,
n and result against the run's reference layout; nothing without scores."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_ppsweep.folder.runfolder import FolderFiles
from pytest_ppsweep.matrix.accuracyspec import AccuracySpec, Task
from pytest_ppsweep.report import accuracyview
from pytest_ppsweep.results.accuracy import Answer, layout_accuracy
from pytest_ppsweep.stats.accuracytest import plan


def test_the_table_names_each_layouts_score_and_result(tmp_path: Path) -> None:
    empty = FolderFiles.of(tmp_path)
    assert accuracyview.html_section(empty) == "" and accuracyview.terminal_lines(empty) == []
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "run.json").write_text(json.dumps(
        {"baseline": "pp1-tp8", "order": ["pp1-tp8", "pp8-tp1"]}))
    spec = AccuracySpec(tasks_path=tmp_path / "t.jsonl", tasks=(Task("q", "a"),))
    p = plan(0.03, 0.05, 0.2, 20)
    for cid, right in (("pp8-tp1", 5), ("pp1-tp8", 19)):
        layout_accuracy(spec, p, cid, [Answer(i, "", "", i < right) for i in range(20)]).write(
            tmp_path)
    files = FolderFiles.of(tmp_path)  # read once: the view parses, it opens nothing
    assert set(files.accuracy) == {"pp1-tp8", "pp8-tp1"}
    html = accuracyview.html_section(files)
    assert "<h3 id=\"ppsweep-accuracy\">Task accuracy</h3>" in html
    assert html.index("pp1-tp8") < html.index("pp8-tp1")  # sweep order
    assert "<td>95.0 %</td><td>[76.4, 99.1]</td><td>reference</td>" in html
    assert "<td>25.0 %</td><td>[11.2, 46.9]</td><td>FAIL</td>" in html
    lines = accuracyview.terminal_lines(files, width=100)
    assert lines[1] == "Task accuracy"
    assert any("pp8-tp1" in x and "25.0 %" in x and "FAIL" in x for x in lines), lines
