"""Which tests of a layout ran and how they ended: what a resume needs besides the rounds.

The plugin writes it, not the user's tests: when the first test of a layout runs, the layout's
tests (those that use its booted service, as collected before any deselection); from each
test's report its outcome. A layout is *finished* in a run
when every one of its tests has an outcome and none failed; ``metadata/tests/<config>.json``::

    {"expected": ["test_sweep.py::test_topology[pp8-tp4-ep4]", ...],
     "outcomes": {"test_sweep.py::test_topology[pp8-tp4-ep4]": "passed", ...}}

Under xdist the worker that runs a layout writes its file, under the run folder's lock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import RunStore, tests_json

__all__ = ["finished", "record", "start"]


def _path(run_dir: Path, config_id: str) -> Path:
    return run_dir / tests_json(config_id)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _update(store: RunStore, config_id: str, expected: Sequence[str] | None,
            outcome: tuple[str, str] | None) -> None:
    path = _path(store.dir, config_id)
    with store.locked():
        data = _read(path)
        outcomes = dict(data.get("outcomes") or {})
        if expected is not None:
            data["expected"] = list(expected)
            outcomes = {}
        if outcome is not None:
            nodeid, result = outcome
            # a failure in any phase (setup, call, teardown) stays a failure
            if outcomes.get(nodeid) != "failed":
                outcomes[nodeid] = result
        data["outcomes"] = outcomes
        store.write_json(str(path.relative_to(store.dir)), data)


def start(store: RunStore, config_id: str, nodeids: Sequence[str]) -> None:
    """The layout runs (again): these are its tests; outcomes of an earlier attempt go."""
    _update(store, config_id, nodeids, None)


def record(store: RunStore, config_id: str, nodeid: str, outcome: str) -> None:
    """How one phase of one test of ``config_id`` ended: passed, failed or skipped."""
    _update(store, config_id, None, (nodeid, outcome))


def finished(run_dir: Path, config_id: str) -> bool | None:
    """Whether every test of the layout ended and none failed; None: nothing was recorded
    (a run folder older than this file, or a layout reused from another run)."""
    path = _path(run_dir, config_id)
    if not path.is_file():
        return None
    data = _read(path)
    outcomes = data.get("outcomes") or {}
    expected = data.get("expected") or []
    if any(v == "failed" for v in outcomes.values()):
        return False
    return all(outcomes.get(n) in ("passed", "skipped") for n in expected)
