"""run/live.Recorded keeps the run folder's live record (metadata/live/<pid>.json) of what each
layout of this process is doing, beside the progress display it passes every call to: written
on a change of phase or detail (never on a bar's redraw), paused between steps, dropped once
the layout is torn down or its boot failed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_ppsweep.folder.runfolder import LiveRecord, RunFolder, live_json
from pytest_ppsweep.run.live import NoStatus, Recorded


class Seen(NoStatus):
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def status(self, key: str, text: str, *, state: str | None = None,
               phase: str | None = None) -> None:
        self.calls.append(("status", key, text))

    def end(self, key: str) -> None:
        self.calls.append(("end", key))


def test_the_live_record_follows_each_layouts_phase(tmp_path: Path) -> None:
    clock = iter(float(t) for t in range(100, 200))
    inner = Seen()
    live = Recorded(inner, LiveRecord(RunFolder(tmp_path), "host-a"), clock=lambda: next(clock))
    path = tmp_path / live_json(os.getpid())

    def layouts() -> dict[str, Any]:
        data = json.loads(path.read_text())
        assert data["pid"] == os.getpid() and data["host"] == "host-a"
        return dict(data["layouts"])

    live.status("pp2", "pp2 booting 3 s / 60 s | ranks ready 1/4",
                state="booting | ranks ready 1/4")
    assert layouts() == {"pp2": {"phase": "booting", "detail": "ranks ready 1/4", "since": 100.0,
                                 "active": True}}
    written = path.stat().st_mtime_ns
    live.status("pp2", "pp2 booting 4 s / 60 s | ranks ready 1/4",
                state="booting | ranks ready 1/4")
    assert path.stat().st_mtime_ns == written  # nothing changed: not written again
    live.status("pp2", "pp2 booting 5 s / 60 s | ranks ready 4/4",
                state="booting | ranks ready 4/4")
    assert layouts()["pp2"]["since"] == 100.0  # the same phase since its start
    live.end("pp2")
    assert layouts()["pp2"]["active"] is False  # booted, between two steps
    live.status("pp2", "pp2 benchmark c8 r1/3 [###] 3/40", phase="benchmark c8 r1/3")
    assert layouts()["pp2"]["phase"] == "benchmark c8 r1/3" and layouts()["pp2"]["active"]
    live.status("pp1", "pp1 booting 1 s / 60 s | ranks ready 0/4",
                state="booting | ranks ready 0/4")
    live.took("pp1", "failed", 1.0)  # its boot failed: nothing more runs
    assert set(layouts()) == {"pp2"}
    live.end("pp2")
    live.status("pp2", "pp2 teardown | stopping 4 ranks", state="teardown")
    live.end("pp2")
    assert layouts() == {}  # torn down: no longer busy
    # every call reached the progress display too
    assert inner.calls[0] == ("status", "pp2", "pp2 booting 3 s / 60 s | ranks ready 1/4")
    assert inner.calls[-1] == ("end", "pp2")
    assert RunFolder(tmp_path).live_records()[0]["layouts"] == {}
