"""Unknown names get a did-you-mean (difflib, matrix/schema.did_you_mean: one rule), and the
error names where the name came from: the option, or the sweep file and its key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import replace_once
from support.paths import REPO

from pytest_ppsweep.matrix.model import MatrixError
from pytest_ppsweep.matrix.parse import load

MICROBATCH = REPO / "test_matrix" / "microbatch.toml"


def _load_changed(tmp_path: Path, old: str, new: str) -> None:
    text = replace_once(MICROBATCH.read_text(), old, new).replace(
        'extends = "cluster.toml"', f'extends = "{REPO / "test_matrix" / "cluster.toml"}"')
    path = tmp_path / "microbatch.toml"
    path.write_text(text)
    load(path)


@pytest.mark.parametrize(("old", "new", "message"), [
    ('baseline = { pp_max_micro_batch_size = "unset" }',
     'baseline = { pp_max_micro_batch_sise = "unset" }',
     "key 'compare.baseline.pp_max_micro_batch_sise': expected one of the sweep's axes "
     "(pp_max_micro_batch_size), found 'pp_max_micro_batch_sise' (did you mean "
     "'pp_max_micro_batch_size'?)"),
    ('baseline = { pp_max_micro_batch_size = "unset" }',
     'baseline = { pp_max_micro_batch_size = "unsett" }',
     "key 'compare.baseline.pp_max_micro_batch_size': expected one of the values of axis "
     "pp_max_micro_batch_size (unset, 1), found 'unsett' (did you mean 'unset'?)"),
    ('[compare]', '[[exclude]]\npp_max_micro_batch_sise = 1\n\n[compare]',
     "unknown key 'exclude[0].pp_max_micro_batch_sise' (did you mean "
     "'pp_max_micro_batch_size'?)"),
    ('[compare]', '[[exclude]]\nworkload = "decod"\n\n[compare]',
     "key 'exclude[0].workload': expected one of 'prefill', 'decode', found 'decod' (did you "
     "mean 'decode'?)"),
    ('[compare]', '[[include]]\npp = 8\ntp = 4\nworkload = "prefil"\n\n[compare]',
     "key 'include[0].workload': expected one of 'prefill', 'decode', found 'prefil' (did you "
     "mean 'prefill'?)"),
    ('baseline = "pp4-tp8-ep4"', 'baseline = "pp4-tp8-ep5"',
     "key 'sweep.baseline': expected the id of one configuration in the sweep"),
    ('cluster = "local"\n', 'cluster = "locl"\n',
     "key 'sweep.cluster': expected one of local, local-b, pro6000, found 'locl' (did you "
     "mean 'local'?)"),
])
def test_an_unknown_name_in_the_sweep_file_names_its_key_and_the_closest(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(MatrixError) as err:
        _load_changed(tmp_path, old, new)
    assert f"{tmp_path / 'microbatch.toml'}: {message}" in str(err.value)
    if "sweep.baseline" in message:  # the layout it names, not a point of another workload
        assert str(err.value).endswith("found 'pp4-tp8-ep5' (did you mean 'pp4-tp8-ep4'?)")


def test_a_missing_sweep_file_names_the_closest_file_beside_it(tmp_path: Path) -> None:
    with pytest.raises(MatrixError) as err:
        load(REPO / "test_matrix" / "microbach.toml")
    assert str(err.value) == (f"{REPO / 'test_matrix' / 'microbach.toml'}: sweep file not found "
                              "(did you mean 'microbatch.toml'?)")


def _dry_run(tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "test_matrix"), "--ppsweep-dry-run", "-q",
         "-p", "no:cacheprovider", "--ppsweep-reports", str(tmp_path / "reports"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    return done.stderr


def test_names_from_the_command_line_name_their_option(tmp_path: Path) -> None:
    """A real pytest: the option the name came from heads the error, never the sweep file."""
    slo = str(REPO / "test_matrix" / "slo.toml")
    err = _dry_run(tmp_path, "--ppsweep-matrix", str(REPO / "test_matrix" / "sol.toml"))
    assert (f"ERROR: --ppsweep-matrix: {REPO / 'test_matrix' / 'sol.toml'}: sweep file not "
            "found (did you mean 'slo.toml'?)") in err
    err = _dry_run(tmp_path, "--ppsweep-matrix", slo, "--ppsweep-config", "pp4-tp8-ep3")
    assert (f"ERROR: --ppsweep-config: pp4-tp8-ep3 matches no configuration of {slo} (did you "
            "mean 'pp4-tp8-ep4'?); expected one of") in err
    err = _dry_run(tmp_path, "--ppsweep-matrix", slo, "--ppsweep-cluster", "locl")
    assert ("ERROR: --ppsweep-cluster: unknown cluster 'locl' (did you mean 'local'?); expected "
            f"one of the clusters of {slo}") in err
