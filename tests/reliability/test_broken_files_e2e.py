"""A handful of broken sweep files through a real pytest run: exit code 4 (usage error), the
message names the file, and no process is started (the stub server leaves a marker when it is
imported, which a launch, a preflight import check or a docker run would all do)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.matrices import one_node_matrix
from support.paths import ACCEPTANCE

STUB = '''
import os, pathlib
pathlib.Path(os.environ["FUZZ_MARKER"]).write_text("started")
'''

BROKEN = {
    "duplicate-key": lambda t: t.replace("repeats = 1", "repeats = 1\nrepeats = 2"),
    "huge-number": lambda t: t.replace("pp = 1", "pp = 0x" + "f" * 400),
    "nan": lambda t: t.replace("repeats = 1", "repeats = 1\nrequest_timeout_s = nan"),
    "bad-regex": lambda t: t.replace('cluster = "one"', 'cluster = "one"\nfatal_patterns = ["(("]'),
    "shell-flag-name": lambda t: t + '\n[server]\n"x; touch /tmp/pwned" = 1\n',
    "deep-nesting": lambda t: t.replace("concurrency = [1]", "concurrency = " + "[" * 3000
                                        + "1" + "]" * 3000),
    "host-with-shell": lambda t: t.replace('"127.0.0.1"', '"127.0.0.1; touch /tmp/pwned"'),
    "not-utf8": lambda t: "# \xff\n" + t,
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_file_is_a_usage_error_and_starts_nothing(
    pytester: pytest.Pytester, tmp_path: Path, name: str
) -> None:
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir()
    (stub_dir / "fuzzstub.py").write_text(STUB)
    marker = tmp_path / "marker"
    text = one_node_matrix("broken", "fuzzstub", 39011, 39012, pythonpath=stub_dir)
    text = text.replace('PYTHONPATH = "', f'FUZZ_MARKER = "{marker}", PYTHONPATH = "')
    folder = pytester.path / "m"
    folder.mkdir()
    broken = BROKEN[name](text)
    (folder / "ppsweep.toml").write_bytes(broken.encode("latin-1" if name == "not-utf8"
                                                        else "utf-8"))
    (folder / "test_sweep.py").write_text(ACCEPTANCE.read_text())
    # the stub does write the marker when it is run: the check below can see a launch
    probe = subprocess.run([sys.executable, "-c", "import fuzzstub"], cwd=stub_dir,
                           env={"FUZZ_MARKER": str(tmp_path / "probe")}, check=False)
    assert probe.returncode == 0 and (tmp_path / "probe").exists()

    result = pytester.runpytest_subprocess(str(folder), "-p", "no:cacheprovider", timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert str(folder / "ppsweep.toml") in out, out
    assert "Traceback" not in out, out
    assert not marker.exists(), "a process was started for a broken sweep file"
    assert not Path("/tmp/pwned").exists()
