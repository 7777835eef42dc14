"""Named baselines: a run's tables, metadata and benchmark.json stored under
``<reports>/baselines/<name>/``, and the resolution of a ``--ppsweep-compare`` reference (a run
folder, a JSON file in one, a run id or a baseline name) to the folder to compare with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from pytest_ppsweep.folder.runfolder import (
    ACCURACY_DIR,
    BASELINE_FILES,
    BASELINE_JSON,
    METADATA_DIR,
    RESULTS_CSV,
)
from pytest_ppsweep.gate.benchjson import atomic_text, load, write_benchmark_json
from pytest_ppsweep.results.aggregate import RunFolderError
from pytest_ppsweep.results.outputs import OUTPUTS_DIR

BASELINES = "baselines"


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


_COPIED = BASELINE_FILES


class BaselineError(ValueError):
    """A baseline name or reference that cannot be used; the message names what was tried."""


def baseline_file(baseline_dir: Path) -> Path:
    """The pytest-benchmark file of a saved baseline (``0001_<name>.json``)."""
    return Path(baseline_dir) / f"0001_{Path(baseline_dir).name}.json"


def save_baseline(run_dir: Path, name: str, root: Path, *, replace: bool = False) -> Path:
    """Copy ``run_dir``'s tables, metadata and benchmark.json to ``<root>/baselines/<name>/``.

    ``root`` is the reports folder. An existing baseline is kept unless ``replace`` (a gate's
    reference must not change under it by accident).
    """
    if not _NAME_RE.match(name):
        raise BaselineError(f"baseline name {name!r}: expected letters, digits, '.', '_' or '-'")
    run_dir = Path(run_dir)
    load(run_dir)  # refuse a folder the gate could not read later
    dest = Path(root) / BASELINES / name
    if dest.exists() and not replace:
        raise BaselineError(f"baseline {name!r} already exists at {dest}; pick another name")
    tmp = dest.with_name(f".{name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for file in _COPIED:
        if (run_dir / file).is_file():
            shutil.copyfile(run_dir / file, tmp / file)
    shutil.copytree(run_dir / METADATA_DIR, tmp / METADATA_DIR)
    if (run_dir / OUTPUTS_DIR).is_dir():  # the layouts' greedy outputs: the gate's correctness
        shutil.copytree(run_dir / OUTPUTS_DIR, tmp / OUTPUTS_DIR)
    if (run_dir / ACCURACY_DIR).is_dir():  # the layouts' task scores: the gate's accuracy
        shutil.copytree(run_dir / ACCURACY_DIR, tmp / ACCURACY_DIR)
    atomic_text(tmp / BASELINE_JSON, json.dumps(
        {"name": name, "source_run": str(run_dir.resolve()),
         "saved": datetime.now(UTC).isoformat()}, indent=2) + "\n")
    write_benchmark_json(tmp, baseline_file(dest).name)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return dest


def resolve(ref: str | Path, reports_root: Path) -> Path:
    """A run folder, a JSON file in one, a run id or a baseline name → the folder to compare with.

    Tried in order: ``ref`` as a path, ``<reports>/baselines/<ref>``, ``<reports>/<ref>``.
    """
    tried = []
    text = str(ref)
    candidates = [Path(ref)]
    if text and "/" not in text and os.sep not in text:
        candidates += [Path(reports_root) / BASELINES / text, Path(reports_root) / text]
    for cand in candidates:
        folder = cand.parent if cand.is_file() and cand.suffix == ".json" else cand
        tried.append(str(cand))
        if (folder / RESULTS_CSV).is_file():
            return folder
        if folder.is_dir():
            raise RunFolderError(f"reference {text!r}: {folder} has no {RESULTS_CSV}")
    raise BaselineError(
        f"reference {text!r}: no run folder or baseline found; looked for {', '.join(tried)}"
    )
