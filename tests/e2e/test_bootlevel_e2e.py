"""Issue 37 point 4 end to end on the emulator: a point measured across two boots carries the
second level in its interval.

Two pytest runs of PP4 and PP8 (3 repeats at C=2 and C=4). Between them, PP8's third round at
each C is taken out of results.csv: the state a run interrupted after PP8's second rounds leaves
(those rounds never written). ``--ppsweep-resume`` then boots PP8 again for its third rounds, so
PP8's rounds come from two real boots of the emulator (two boot ids in results.csv), PP4's from
one. The resumed run's answer must judge PP8 with the boot as the unit (its interval is the
two-level one, computed here from results.csv, not the rounds pooled as one level),
state both variance components, and say that PP4's side holds one boot only."""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from support.runs import rows

from pytest_ppsweep.stats.decision import Rule, Sample, interval, levels

pytestmark = pytest.mark.slow

PP4, PP8 = "pp4-tp8-ep4", "pp8-tp4-ep4"


def _drop_third_rounds(results: Path, config_id: str) -> int:
    with results.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        kept = list(reader)
    left = [r for r in kept if not (r["config_id"] == config_id and r["repeat"] == "3")]
    with results.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(left)
    return len(kept) - len(left)


def _values(got: list[dict[str, str]], cid: str, conc: str, boots: bool) -> list[float]:
    mine = [r for r in got if r["config_id"] == cid and r["concurrency"] == conc
            and r["completed"] == r["num_requests"]]
    values = [float(r["input_tps"]) for r in mine]
    return Sample(values, [r["boot"] for r in mine]) if boots else values


def test_a_point_of_two_boots_is_judged_by_its_boots(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    folder = sweep_dir(edits={"repeats = 2": "repeats = 3"})
    reports = tmp_path / "reports"
    first = pytester.runpytest_subprocess(str(folder), "--ppsweep-reports", str(reports),
                                          "--ppsweep-run-id", "boots", timeout=600)
    assert first.ret == 0, first.stdout.str()[-4000:]
    run = reports / "boots"
    once = json.loads((run / "answers.json").read_text())["answers"]
    layout = next(a for a in once if a["kind"] == "layout")
    assert layout["boots"] == {PP4: 1, PP8: 1}
    assert any(r.startswith("Single boot per layout: the boot-to-boot noise is not in these "
                            "intervals") for r in layout["reasons"]), layout["reasons"]
    # the terminal's Answers block (its paragraphs wrap at the terminal's width)
    assert "Single boot per layout: the boot-to-boot noise" in " ".join(first.stdout.str().split())

    assert _drop_third_rounds(run / "results.csv", PP8) == 2  # C=2 and C=4
    resumed = pytester.runpytest_subprocess(str(folder), "--ppsweep-reports", str(reports),
                                            "--ppsweep-resume", str(run), timeout=600)
    text = resumed.stdout.str()
    assert resumed.ret == 0, text[-4000:]
    got = rows(run / "results.csv")
    boots = {cid: [r["boot"] for r in got if r["config_id"] == cid and r["concurrency"] == "2"]
             for cid in (PP4, PP8)}
    # PP4 kept (one boot); PP8's rounds 1-2 from its first boot, round 3 from the second
    assert len(set(boots[PP4])) == 1 and len(boots[PP4]) == 3, boots
    assert len(boots[PP8]) == 3 and boots[PP8][0] == boots[PP8][1] != boots[PP8][2], boots

    answers = json.loads((run / "answers.json").read_text())["answers"]
    layout = next(a for a in answers if a["kind"] == "layout")
    assert layout["boots"] == {PP4: 1, PP8: 2}
    assert layout["levels"][PP8]["boots"] == 2 and PP4 not in layout["levels"]
    two = next(r for r in layout["reasons"] if r.startswith("Two levels: "))
    assert f"{PP8} 2 boots (σ within a boot " in two
    # PP4's single boot takes the between-boot variance this run measured (PP8's two boots)
    assert "Single-boot sides take the boot-to-boot σ" in two
    assert "of this run's repeated boots (1 point, 1 degree of freedom)" in two
    assert f"Two levels: {PP8} 2 boots" in " ".join(text.split())  # the terminal shows it too
    # the run's own between-boot variance: PP8's, its mean over the Cs, 1 degree of freedom
    found = [levels(_values(got, PP8, conc, True)) for conc in ("2", "4")]
    between = statistics.fmean(lv.between for lv in found if lv is not None)
    rule = Rule(boot_var=between, boot_df=1.0, boot_source="this run")
    for conc in ("2", "4"):
        ev = next(e for e in layout["evidence"] if {e["point"], e["versus"]} == {PP4, PP8}
                  and e["metric"] == "input_tps" and str(e["concurrency"]) == conc)
        leveled = interval(_values(got, ev["point"], conc, True),
                           _values(got, ev["versus"], conc, True), rule)
        pooled = interval(_values(got, ev["point"], conc, False),
                          _values(got, ev["versus"], conc, False))
        assert leveled is not None and pooled is not None
        # the answer's interval is the two-level one: PP8's two boot means, 1 degree of freedom,
        # against PP4's rounds plus the run's between-boot variance
        assert ev["noise_pct"] == pytest.approx(leveled.half_width_pct, abs=2e-4), (ev, conc)
        # and not the rounds pooled as one level (which of the two is wider depends on the draw:
        # two boot means that happen to agree give a narrower one)
        assert ev["noise_pct"] != pytest.approx(pooled.half_width_pct, abs=2e-4), (ev, pooled)


AA_AXIS = """
[[configs]]
pp = 8
tp = 4

[axes]
log_level = ["info", "warning"]
"""


def test_an_a_a_axis_with_boot_offsets_is_not_plainly_decided(
    pytester: pytest.Pytester, sweep_dir: Callable[..., Path], tmp_path: Path
) -> None:
    """The audit's case: one layout, an axis whose two values change nothing (log_level), on an
    emulator whose every boot draws an offset of σ 1.5 %. Each value is one boot, so the gap
    between them is the two boots' offsets; the answer may separate them within those boots
    but never says plain "decided" (its gap would have to clear the one-boot bound, 5 %, a
    3.3σ draw of two offsets at 1.5 %, beyond the rounds' interval)."""
    profile = tmp_path / "offset.toml"
    shipped = (Path(__file__).resolve().parents[2] / "pytest_ppsweep" / "sim" / "profiles"
               / "kimi-k3-6000d.toml").read_text(encoding="utf-8")
    assert "\nboot_offset_pct = 0.0\n" in shipped
    profile.write_text(shipped.replace("\nboot_offset_pct = 0.0\n", "\nboot_offset_pct = 1.5\n"),
                       encoding="utf-8")
    folder = sweep_dir(configs=AA_AXIS, net="127.0.58", edits={
        "repeats = 2": "repeats = 3",
        "PPSWEEP_SIM_TIME_SCALE = ": f'PPSWEEP_SIM_PROFILE = "{profile}", '
                                    "PPSWEEP_SIM_TIME_SCALE = "})
    reports = tmp_path / "reports"
    done = pytester.runpytest_subprocess(str(folder), "--ppsweep-reports", str(reports),
                                         "--ppsweep-run-id", "aa", timeout=600)
    assert done.ret == 0, done.stdout.str()[-4000:]
    answers = json.loads((reports / "aa" / "answers.json").read_text())["answers"]
    axis = next(a for a in answers if a["kind"] == "axis" and a["axis"] == "log_level")
    assert axis["status"] in ("decided within one boot", "inconclusive", "equivalent"), axis
    assert any(r.startswith("Single boot per layout: the boot-to-boot noise is not in these "
                            "intervals") for r in axis["reasons"]), axis["reasons"]
    if axis["status"] == "decided within one boot":
        assert any(r.startswith("Decided within one boot: ") for r in axis["reasons"])
        assert "--ppsweep-boots 2" in (axis["rerun"] or ""), axis
