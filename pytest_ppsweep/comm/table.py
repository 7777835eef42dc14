"""The seeds' §9.2 table from comm.csv rows: per layout and domain, the topology label, latency
and busbw at 128 MiB and the mean busbw over 128 and 256 MiB (blank when not swept)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["AT_128M", "AT_256M", "SUMMARY_COLUMNS", "curves", "summary_rows"]

AT_128M = 128 << 20
AT_256M = 256 << 20
SUMMARY_COLUMNS = (
    "config_id", "domain", "label", "tp", "nodes", "tool", "max_size_bytes",
    "latency_128m_ms", "busbw_128m_gbs", "busbw_mean_128m_256m_gbs", "busbw_max_gbs",
    "simulated",
)


def _f(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _groups(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        out.setdefault((str(row["config_id"]), str(row["domain"])), []).append(row)
    return out


def summary_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (layout, domain), in the order first seen."""
    out = []
    for (config_id, domain), group in _groups(rows).items():
        by_size = {int(r["size_bytes"]): r for r in group}
        at128 = by_size.get(AT_128M)
        at256 = by_size.get(AT_256M)
        bus = [b for r in (at128, at256) if r is not None and (b := _f(r["busbw_gbs"])) is not None]
        t128 = _f(at128["time_us"]) if at128 is not None else None
        every = [b for r in group if (b := _f(r["busbw_gbs"])) is not None]
        first = group[0]
        out.append({
            "config_id": config_id, "domain": domain, "label": first.get("label", ""),
            "tp": first.get("tp", ""), "nodes": first.get("nodes", ""),
            "tool": first.get("tool", ""), "max_size_bytes": max(by_size),
            "latency_128m_ms": round(t128 / 1000, 4) if t128 is not None else "",
            "busbw_128m_gbs": _f(at128["busbw_gbs"]) if at128 is not None else "",
            "busbw_mean_128m_256m_gbs": round(sum(bus) / len(bus), 4) if len(bus) == 2 else "",
            "busbw_max_gbs": max(every) if every else "",
            "simulated": first.get("simulated", ""),
        })
    return out


def curves(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """busbw by size, one curve per ``<layout> <domain>`` (the report's chart)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for (config_id, domain), group in _groups(rows).items():
        points = sorted((int(r["size_bytes"]), b) for r in group
                        if (b := _f(r["busbw_gbs"])) is not None)
        out[f"{config_id} {domain}"] = points
    return out
