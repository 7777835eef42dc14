"""JSON helpers: orjson when installed (a 100 KB ``input_ids`` body parses in ~0.1 ms instead of
~1 ms, which matters because parsing runs on the event loop that also emits due tokens),
the standard library otherwise."""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None  # type: ignore[assignment]


def loads(data: bytes) -> Any:
    """Parse JSON bytes."""
    if orjson is not None:
        return orjson.loads(data)
    return json.loads(data)


FLAT_INT_BYTES = b"0123456789, \n\r\t-"
FAST_MIN_BYTES = 4096


def loads_request(raw: bytes) -> Any:
    """Parse a request body; a large flat ``input_ids`` array is counted, not materialised.

    Only the token count of ``input_ids`` matters to the emulator, so a flat integer array is
    replaced by ``range(n)`` after a C-speed scan (~50 us for 16K ids instead of ~0.5 ms): the
    event loop that emits due tokens is never blocked for long. Anything unusual (nested lists,
    non-integers, small bodies) goes through the full parser.
    """
    key = raw.find(b'"input_ids"')
    if len(raw) < FAST_MIN_BYTES or key < 0:
        return loads(raw)
    start = raw.find(b"[", key)
    end = raw.find(b"]", start + 1)
    if start < 0 or end < 0 or raw[key + 11 : start].strip() != b":":
        return loads(raw)
    inner = raw[start + 1 : end]
    if inner.translate(None, FLAT_INT_BYTES):
        return loads(raw)
    body = loads(raw[:start] + b"[]" + raw[end + 1 :])
    if isinstance(body, dict):
        body["input_ids"] = range(inner.count(b",") + 1 if inner.strip() else 0)
    return body


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes (SGLang's ORJSONResponse style)."""
    if orjson is not None:
        return orjson.dumps(obj)
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
