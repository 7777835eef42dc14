"""measure/groupfacts.py: a layout's facts per server group, added up over its boots; the whole
layout's by one rule (fatal lines added up, the worst rank over the groups); the file as
written is read back typed, and a file that is not what a run writes is refused naming the
file, the key, what was expected and what was found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_ppsweep.folder.runfolder import RunStore, groups_json
from pytest_ppsweep.measure.gpu import WorstRank
from pytest_ppsweep.measure.groupfacts import FIRST_FATAL_LINES, GroupLogScan, LayoutFacts


def _pd() -> LayoutFacts:
    return (LayoutFacts("pd")
            .placed("prefill", "prefill", "pp2-tp8-ep8", ["n0", "n1"])
            .placed("decode", "decode", "pp1-tp16-ep16", ["n2", "n3"]))


def test_the_whole_layout_adds_the_fatal_lines_and_takes_the_worst_group() -> None:
    facts = (_pd()
             .scanned("prefill", ["prefill-node0.log:4: [traceback] Traceback"])
             .scanned("decode", ["decode-node1.log:7: [cuda-oom] a", "decode-node1.log:9: [x] b"])
             .measured("prefill", "after", WorstRank("n1", 2, 70_000, 81_000))
             .measured("decode", "after", WorstRank("n3", 0, 79_000, 81_000))
             .measured("decode", "before", WorstRank("n2", 1, 600, 81_000)))
    assert facts.per_group
    assert facts.fatal_lines() == 3
    assert facts.worst("after") == WorstRank("n3", 0, 79_000, 81_000)
    assert facts.worst("before") == WorstRank("n2", 1, 600, 81_000)
    assert facts.worst("cleaned") is None
    assert facts.group("prefill").hosts == ("n0", "n1")


def test_a_tie_between_groups_goes_to_the_lower_gpu_index_as_between_gpus() -> None:
    facts = (_pd().measured("prefill", "after", WorstRank("n0", 3, 50_000, 81_000))
             .measured("decode", "after", WorstRank("n2", 1, 50_000, 81_000)))
    assert facts.worst("after") == WorstRank("n2", 1, 50_000, 81_000)


def test_boots_add_up_per_group() -> None:
    """A later boot's clean logs do not hide an earlier one's fatal lines; the memory kept is
    the most loaded over the boots; the first lines are capped, the count is not."""
    lines = [f"decode-node0.log:{i}: [cuda-oom] x" for i in range(1, 5)]
    facts = (_pd().scanned("decode", lines).scanned("decode", [])
             .scanned("decode", lines)
             .measured("decode", "after", WorstRank("n2", 0, 79_000, 81_000))
             .measured("decode", "after", WorstRank("n3", 0, 40_000, 81_000)))
    scan = facts.group("decode").log_scan
    assert scan == GroupLogScan(8, tuple((lines + lines)[:FIRST_FATAL_LINES]))
    assert facts.group("prefill").log_scan is None  # not scanned yet: no count, not 0
    assert facts.worst("after") == WorstRank("n2", 0, 79_000, 81_000)


def test_a_single_serve_group_writes_no_file(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "r")
    single = LayoutFacts("pp4").placed("", "serve", "pp4-tp8-ep4", ["n0"]).scanned("", ["x"])
    assert not single.per_group
    assert single.write(store) is None
    assert LayoutFacts.read(store, "pp4") is None


def test_written_and_read_back_typed(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "r")
    facts = (_pd().scanned("decode", ["decode-node1.log:7: [cuda-oom] a"])
             .scanned("router", [], role="router")
             .measured("prefill", "cleaned", WorstRank("n0", 0, 500, 81_000))
             .measured("prefill", "before", WorstRank("n1", 0, 400, 81_000)))
    path = facts.write(store)
    assert path == store.file(groups_json("pd"))
    assert LayoutFacts.read(store, "pd") == facts
    written = json.loads(path.read_text())
    assert [g["label"] for g in written["groups"]] == ["prefill", "decode", "router"]
    assert written["groups"][2]["role"] == "router"
    assert list(written["groups"][0]["memory"]) == ["before", "cleaned"]  # the moments' order
    assert written["groups"][0]["memory"]["before"]["headroom_mib"] == 80_600


@pytest.mark.parametrize(("groups", "key", "expected", "found"), [
    ("nope", "groups", "a list", "'nope'"),
    ([{"label": 3}], "groups[0].label", "a string", "3"),
    ([{"label": "d", "log_scan": {"fatal_lines": "2", "first": []}}],
     "groups[0].log_scan.fatal_lines", "an integer", "'2'"),
    ([{"label": "d", "memory": {"after": {"gpu": 0, "used_mib": True, "total_mib": 1}}}],
     "groups[0].memory.after.used_mib", "an integer", "True"),
])
def test_a_file_not_as_written_is_refused_naming_file_key_expected_found(
        tmp_path: Path, groups: object, key: str, expected: str, found: str) -> None:
    store = RunStore(tmp_path, "r")
    store.write_json(groups_json("pd"), {"config_id": "pd", "groups": groups})
    with pytest.raises(ValueError, match="expected") as refused:
        LayoutFacts.read(store, "pd")
    assert str(refused.value) == (f"{store.file(groups_json('pd'))}: {key}: expected "
                                  f"{expected}, found {found}")


def test_a_torn_file_is_refused_naming_it(tmp_path: Path) -> None:
    store = RunStore(tmp_path, "r")
    store.file(groups_json("pd")).write_text('{"groups": [')
    with pytest.raises(ValueError, match=r"pd\.groups\.json: not JSON"):
        LayoutFacts.read(store, "pd")
