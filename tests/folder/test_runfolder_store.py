"""The run folder's copy of the sweep file: with the shared files its ``extends`` names, so that
the evidence reads as the sweep that ran, and with secrets redacted."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from support.paths import SEED

from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.parse import load


def test_the_sweep_file_is_copied_with_its_shared_files_and_reads_the_same(
    tmp_path: Path
) -> None:
    sweep = load(SEED)
    assert sweep.shared_files == ((SEED.parent / "cluster.toml").resolve(),)
    store = RunStore(tmp_path / "reports", "r")
    store.copy_matrix(SEED, sweep.shared_files)
    copy = store.dir / "metadata" / "ppsweep.toml"
    assert (store.dir / "metadata" / "cluster.toml").is_file()
    again = load(copy)
    assert replace(again, path=SEED, origins=()) == replace(sweep, origins=())


def test_a_shared_file_is_redacted_and_a_taken_name_is_prefixed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    shared = tmp_path / "a" / "sweep.toml"
    shared.write_text('[env]\nHF_TOKEN = "hf_runstoresecret"\n')
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('extends = "a/sweep.toml"\n')
    store = RunStore(tmp_path / "reports", "r")
    store.copy_matrix(sweep, [shared])
    meta = store.dir / "metadata"
    assert sorted(p.name for p in meta.iterdir()) == ["extends-1-sweep.toml", "sweep.toml"]
    text = (meta / "extends-1-sweep.toml").read_text()
    assert "hf_runstoresecret" not in text and "HF_TOKEN" in text
