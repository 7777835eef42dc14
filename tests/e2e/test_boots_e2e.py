"""``--ppsweep-boots`` end to end on the emulator (issue 37 point 3: the rerun's boots × rounds
run as one command).

One run of PP4 and PP8 with 2 boots × 2 rounds at C=2 and C=4: every layout's first boot before
any second, each boot's rounds numbered on from the boot before, two boot ids per point in
results.csv, the tests of the second boot named ``-boot2``, and the answer judging both points
with the boot as the unit. Then the second boot of PP8 is taken out of results.csv (a run
interrupted during it) and ``--ppsweep-resume`` boots only that one again."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support.runs import rows

from pytest_ppsweep.stats.spread import boot_spread_pct

pytestmark = pytest.mark.slow

PP4, PP8 = "pp4-tp8-ep4", "pp8-tp4-ep4"


def test_two_boots_of_every_layout_in_one_run(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir()
    reports = tmp_path / "reports"
    first = pytester.runpytest_subprocess(str(folder), "--ppsweep-reports", str(reports),
                                          "--ppsweep-run-id", "boots", "--ppsweep-boots", "2",
                                          "-v", timeout=600)
    text = first.stdout.str()
    assert first.ret == 0, text[-4000:]
    run = reports / "boots"
    got = rows(run / "results.csv")
    log = (run / "progress.log").read_text(encoding="utf-8")
    # every layout's first boot, then every layout's second (results.csv is sorted by layout
    # at the close; progress.log keeps the order): four boots, four boot ids
    booting = re.findall(r"\] (\S+): booting on 4 nodes of local \(boot (\d) of 2\)", log)
    assert booting == [(PP4, "1"), (PP8, "1"), (PP4, "2"), (PP8, "2")], booting
    assert len({r["boot"] for r in got}) == 4 and all(r["boot"] for r in got)
    for cid in (PP4, PP8):
        for conc in ("2", "4"):
            mine = [r for r in got if r["config_id"] == cid and r["concurrency"] == conc]
            assert [r["repeat"] for r in mine] == ["1", "2", "3", "4"], mine
            assert mine[0]["boot"] == mine[1]["boot"] != mine[2]["boot"] == mine[3]["boot"]
            assert all(r["extra"] == "False" for r in mine)
    # the second boot's tests carry -boot2; the SLO-less sweep's tests all ran on both boots
    assert f"test_prefill[{PP8}-c4-boot2] PASSED" in text
    assert f"test_topology[{PP4}-boot2] PASSED" in text
    assert f"{PP8}: booting on 4 nodes of local (boot 2 of 2)" in log
    assert f"{PP8} C=4: round 3/4, boot 2/2 started" in log
    assert json.loads((run / "metadata" / "run.json").read_text())["boots"] == 2

    # the spread rule looks within each boot (the boots' difference is the second level)
    summary = rows(run / "summary.csv")
    for cid in (PP4, PP8):
        mine = [r for r in got if r["config_id"] == cid and r["concurrency"] == "2"]
        want = boot_spread_pct([float(r["input_tps"]) for r in mine], [r["boot"] for r in mine])
        row = next(r for r in summary if r["config_id"] == cid and r["concurrency"] == "2")
        assert float(row["tps_spread_pct"]) == pytest.approx(want, abs=1e-3), (row, mine)

    answers = json.loads((run / "answers.json").read_text())["answers"]
    layout = next(a for a in answers if a["kind"] == "layout")
    assert layout["boots"] == {PP4: 2, PP8: 2}
    assert layout["levels"][PP4]["boots"] == layout["levels"][PP8]["boots"] == 2
    assert any(r.startswith("Two levels: ") for r in layout["reasons"]), layout["reasons"]

    # PP8's second boot interrupted: its rounds never written
    results = run / "results.csv"
    with results.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        fields, kept = list(reader.fieldnames or []), list(reader)
    left = [r for r in kept if not (r["config_id"] == PP8 and int(r["repeat"]) > 2)]
    assert len(kept) - len(left) == 4
    with results.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(left)
    resumed = pytester.runpytest_subprocess(str(folder), "--ppsweep-reports", str(reports),
                                            "--ppsweep-resume", str(run), "--ppsweep-boots", "2",
                                            "-v", timeout=600)
    text = resumed.stdout.str()
    assert resumed.ret == 0, text[-4000:]
    boots = [line for line in text.splitlines() if ": booting on " in line]
    assert len(boots) == 1 and f"{PP8}: booting on 4 nodes of local (boot 2 of 2)" in boots[0], \
        boots
    assert f"test_prefill[{PP8}-c2-boot1] REUSED" in text or \
        f"test_prefill[{PP8}-c2-boot1] SKIPPED" in text, text[-3000:]
    got = rows(run / "results.csv")
    mine = [r for r in got if r["config_id"] == PP8 and r["concurrency"] == "2"]
    assert [r["repeat"] for r in mine] == ["1", "2", "3", "4"], mine
    assert mine[1]["boot"] != mine[2]["boot"] == mine[3]["boot"]
