"""The run folder's writer, where measure/ and run/ have always found it: the names live in
:mod:`pytest_ppsweep.folder.runfolder` (its one owner)."""

from __future__ import annotations

from pytest_ppsweep.folder.runfolder import (
    CONFIG_COLUMNS,
    RESULT_COLUMNS,
    RunStore,
    new_run_id,
)

__all__ = ["CONFIG_COLUMNS", "RESULT_COLUMNS", "RunStore", "new_run_id"]
