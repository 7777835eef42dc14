"""configs.csv's row of one layout: each fact noted as learnt (the facts journal, crash-safe),
configs.csv written once per phase of the layout (its boot, its teardown), not per fact."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pytest_ppsweep.folder.runfolder import CONFIG_COLUMNS, RunFolder, RunStore
from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.measure.configrow import ConfigRow
from pytest_ppsweep.measure.gpu import WorstRank

CID = "pp2-tp1-ep1"


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path, "r-1")


def count_writes(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    writes: list[int] = []
    real = store._write_configs

    def counted(rows: object) -> None:
        writes.append(1)
        real(rows)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_write_configs", counted)
    return writes


def boot_and_teardown(row: ConfigRow) -> None:
    """What run/lifecycle.py and run/boots.py tell a booted layout's row, in their order."""
    row.planned(Config(pp=2, tp=1, ep=1, order=3))
    row.placed("local")
    row.topology(True)
    row.booted(12.5, 64)
    row.kv_capacity(655_360, 16_385)
    row.held(1.23456)
    row.boot_of(CID)
    row.logs(0)
    row.memory(WorstRank(node="127.0.0.1", index=1, used_mib=70_000, total_mib=80_000))
    row.held(2.5)


def csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_configs_csv_is_written_once_per_phase_not_per_fact(
        store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = count_writes(store, monkeypatch)
    row = ConfigRow(store, CID)
    row.planned(Config(pp=2, tp=1, ep=1, order=3))
    row.placed("local")
    row.topology(True)
    row.booted(12.5, 64)
    assert writes == [] and not store.configs_csv.exists()
    row.held(1.0)  # the boot ends
    assert len(writes) == 1
    row.boot_of(CID)
    row.logs(0)
    row.memory(WorstRank(node="n", index=0, used_mib=1, total_mib=2))
    assert len(writes) == 1
    row.held(2.0)  # the teardown ends
    assert len(writes) == 2


def test_every_column_and_value_as_written_per_fact(store: RunStore) -> None:
    boot_and_teardown(ConfigRow(store, CID))
    assert csv_rows(store.configs_csv) == [{
        "config_id": CID, "pp": "2", "tp": "1", "ep": "1", "order": "3", "boot_ok": "True",
        "boot_s": "12.5", "boot_error": "", "topology_ok": "True",
        "pp_max_micro_batch_size": "64", "log_clean": "True", "log_findings": "0",
        "mem_peak_mib": "70000", "mem_total_mib": "80000", "mem_headroom_mib": "10000",
        "mem_worst_node": "127.0.0.1", "mem_worst_gpu": "1", "cluster": "local",
        "held_s": "2.5", "boot_of": CID, "kv_tokens": "655360", "kv_requests": "39",
    }]
    assert list(csv_rows(store.configs_csv)[0]) == list(CONFIG_COLUMNS)


def test_no_kv_capacity_reported_writes_none(store: RunStore) -> None:
    row = ConfigRow(store, CID)
    row.planned(Config(pp=2, tp=1, ep=1, order=3))
    row.kv_capacity(None, 16_385)
    row.kv_capacity(0, 16_385)
    row.held(1.0)
    (written,) = csv_rows(store.configs_csv)
    assert written["kv_tokens"] == written["kv_requests"] == ""


def test_a_crash_keeps_every_fact_learnt(store: RunStore) -> None:
    """Facts learnt after the last write of configs.csv are in the journal: a reader of the
    folder sees them, and the next fold (a resumed run, the close) writes them."""
    row = ConfigRow(store, CID)
    boot_and_teardown(row)
    other = ConfigRow(store, "pp1-tp1-ep1")
    other.planned(Config(pp=1, tp=1, ep=1, order=0))
    other.placed("local-b")  # the process dies here: configs.csv lacks the row
    assert [r["config_id"] for r in csv_rows(store.configs_csv)] == [CID]
    seen = RunFolder(store.dir).config_rows()
    assert seen["pp1-tp1-ep1"]["cluster"] == "local-b"
    assert seen["pp1-tp1-ep1"]["boot_ok"] == "False"  # cells are strings, as in the CSV
    assert seen[CID]["held_s"] == "2.5"
    RunStore(store.dir.parent, store.run_id).fold_configs()
    assert [r["config_id"] for r in csv_rows(store.configs_csv)] == ["pp1-tp1-ep1", CID]


def test_a_torn_journal_line_is_left_out(store: RunStore) -> None:
    ConfigRow(store, CID).placed("local")
    with (store.dir / "metadata" / "configs.facts.jsonl").open("a") as fh:
        fh.write('{"config_id": "pp2-tp1-ep1", "clus')
    assert RunFolder(store.dir).config_rows()[CID]["cluster"] == "local"


def test_an_unknown_column_is_refused(store: RunStore) -> None:
    with pytest.raises(ValueError, match=r"configs\.csv: unknown columns"):
        store.note_config(CID, colour="blue")
