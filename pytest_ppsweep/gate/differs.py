"""What differs between a point of the current run and the same point of the gate's reference
run, field by field from their manifests (image, server arguments, env, workload, cluster): the
gate's delta says what it measured (``--ppsweep-image`` gives ``image: a → b``), and a delta
that also changed something else is visible. Kept apart from the comparison itself (noise,
tiers) so that both evolve on their own."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Iterable
from pathlib import Path

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import GATE_CSV

__all__ = ["add_differs_column", "config_differences", "differs_html", "differs_lines"]

_IDENTITY = ("config_id",)


def config_differences(cur_dir: Path, ref_dir: Path, config_id: str) -> list[str] | None:
    """``["image: a → b", …]`` (reference → current); None when a manifest is missing."""
    cur, ref = manifest.load(Path(cur_dir), config_id), manifest.load(Path(ref_dir), config_id)
    if cur is None or ref is None:
        return None
    return [d for d in manifest.differences(ref, cur) if d.split(": ", 1)[0] not in _IDENTITY]


def _ids(config_ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(str(c) for c in config_ids))


def differs_lines(cur_dir: Path, ref_dir: Path, config_ids: Iterable[str]) -> list[str]:
    """One ``DIFFERS <config>: …`` line per point whose manifests differ from the reference's
    (``SAME`` when identical); nothing for a point without both manifests."""
    lines = []
    for cid in _ids(config_ids):
        diff = config_differences(cur_dir, ref_dir, cid)
        if diff is None:
            continue
        lines.append(f"DIFFERS {cid}: {'; '.join(diff)}" if diff
                     else f"SAME {cid}: manifest identical to the reference's")
    return lines


def differs_html(cur_dir: Path, ref_dir: Path, config_ids: Iterable[str]) -> str:
    """The same as an HTML table (every value escaped)."""
    rows = []
    for cid in _ids(config_ids):
        diff = config_differences(cur_dir, ref_dir, cid)
        if diff is None:
            continue
        text = "; ".join(diff) if diff else "manifest identical"
        rows.append(f"<tr><td>{html.escape(cid)}</td><td>{html.escape(text)}</td></tr>")
    if not rows:
        return ""
    return ('<h3>Gate: what differs from the reference, per configuration</h3>'
            '<table class="ppsweep-gate-differs"><thead><tr><th>configuration</th>'
            f"<th>differs in (reference → current)</th></tr></thead><tbody>{''.join(rows)}"
            "</tbody></table>")


def add_differs_column(run_dir: Path, ref_dir: Path, name: str = GATE_CSV) -> Path:
    """gate.csv with a ``differs`` column: the point's manifest differences (``;``-joined)."""
    path = Path(run_dir) / name
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
        header = list(rows[0].keys()) if rows else []
    if not rows:
        return path
    cache: dict[str, str] = {}
    for row in rows:
        cid = row.get("config_id", "")
        if cid not in cache:
            diff = config_differences(run_dir, ref_dir, cid)
            cache[cid] = "" if diff is None else "; ".join(diff) or "(identical)"
        row["differs"] = cache[cid]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*[h for h in header if h != "differs"], "differs"])
    writer.writeheader()
    writer.writerows(rows)
    tmp = path.with_name(f".{path.name}.differs.tmp")
    tmp.write_text(out.getvalue(), encoding="utf-8")
    tmp.replace(path)
    return path
