"""What a pytester run of a sweep printed."""

from __future__ import annotations

import re


def outcomes(text: str) -> dict[str, str]:
    """``test_x[id] PASSED`` lines of a -v run → {test id: outcome}."""
    found = re.findall(r"::(\S+) (PASSED|FAILED|ERROR|SKIPPED)", text)
    return dict(found)
