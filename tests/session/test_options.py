"""``pytest --help`` works and shows every option of the plugin (argparse formats each help
text with ``%``: a bare percent sign in one of them crashed the whole help)."""

from __future__ import annotations

import re
import subprocess
import sys

from support.paths import REPO

from pytest_ppsweep.session.options import OPTIONS


def test_help_lists_every_ppsweep_option() -> None:
    text = (REPO / "pytest_ppsweep" / "session" / "options.py").read_text()
    declared = set(re.findall(r'"(--ppsweep-[a-z0-9-]+)"', text))
    declared |= {"--" + name.replace("_", "-") for name, _, _ in OPTIONS}
    assert len(declared) > 10, declared
    done = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    missing = sorted(o for o in declared if o not in done.stdout)
    assert not missing, f"not in pytest --help: {missing}"
    assert "input_tps:-3% or ttft_p50:+5%" in " ".join(done.stdout.split())


def test_the_options_table_lists_every_ppsweep_option() -> None:
    """The docs' table of options (docs/guides/running.md, "Options", moved there from the
    README) once lacked --ppsweep-dry-run, --ppsweep-comm and --ppsweep-slurm-jobid: every
    option the plugin declares has its row."""
    text = (REPO / "pytest_ppsweep" / "session" / "options.py").read_text()
    declared = set(re.findall(r'"(--ppsweep-[a-z0-9-]+)"', text))
    declared |= {"--" + name.replace("_", "-") for name, _, _ in OPTIONS}
    rows = [line for line in (REPO / "docs" / "guides" / "running.md").read_text().splitlines()
            if line.startswith("| `--ppsweep-")]
    listed = {o for line in rows for o in re.findall(r"`(--ppsweep-[a-z0-9-]+)", line.split(
        " | ")[0])}
    assert sorted(declared - listed) == [], "not in the options table of docs/guides/running.md"
