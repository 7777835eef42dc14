"""What a pytester run of a sweep printed."""

from __future__ import annotations

import re


def counts(text: str) -> tuple[int, int, int, int]:
    """(collected, deselected, selected) of pytest's header and the number of tests its final
    line says ran (passed, failed, errors, skipped, xfailed, xpassed)."""
    head = re.search(r"collected (\d+) items?(?: / (\d+) deselected)?(?: / (\d+) selected)?",
                     text)
    assert head, text[:2000]
    collected = int(head[1])
    deselected = int(head[2] or 0)
    selected = int(head[3]) if head[3] else collected - deselected
    final = text.strip().splitlines()[-1]
    ran = sum(int(n) for n, what in re.findall(
        r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", final))
    return collected, deselected, selected, ran


def outcomes(text: str) -> dict[str, str]:
    """``test_x[id] PASSED`` lines of a -v run → {test id: outcome}."""
    found = re.findall(r"::(\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS|REUSED)", text)
    return dict(found)
