"""``metadata/run.json``'s owner, where session/ and run/ have always found it: it lives in
:mod:`pytest_ppsweep.folder.runfolder` with every other name of the run folder."""

from __future__ import annotations

from pytest_ppsweep.folder.runfolder import RUN_JSON, RunJson, axis_fields, run_id_of

__all__ = ["RUN_JSON", "RunJson", "axis_fields", "run_id_of"]
