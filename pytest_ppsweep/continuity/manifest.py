"""What a configuration's numbers depend on, to reuse them safely; and resuming a killed run.

A manifest holds the image (and image id when known), the engine and its version, model path, every
server flag, the environment, each node's exact argv and environment (``launch.rank_specs``), the
whole workload and the cluster's nodes, secrets redacted. The seeds' rule for reuse: everything but
the run must be identical. So :func:`differences` compares every field except the per-run ``run``
block (run id and time, added by :func:`write`) and ``reused_from`` (set by :func:`adopt`). Ports
stay compared: here they come from the cluster definition, not from the run, and a changed one means
a changed cluster. Not in the manifest because they do not change what is measured: SSH access
details (``ssh_user``, ``ssh_key``, …) and the evaluation settings (boot timeout, spread threshold,
fatal patterns). The manifest is meant to be written before boot, so two manifests compare like with
like; a field unknown then (``engine_version``) is ``null``.

A layout this run does not measure can take its numbers from an earlier run
(:func:`earlier_baseline`, the seeds' partial runs: PP1 was not rerun but taken from an earlier
run after checking field by field that everything but the layout matched). The check is the
reuse check, on the baseline layout: the manifest this run would write for the baseline equals
the one the earlier run wrote for it (so image, engine version, model, every server flag and
env var, the workload and the cluster's hosts match; the baseline's own layout-only flags must
match too, while those other layouts set for themselves are what the deltas are about), and its
rounds there all completed N/N.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_ppsweep.cluster.rankspec import RankSpec, rank_specs
from pytest_ppsweep.folder.runfolder import (
    CONFIG_COLUMNS,
    GPU_DIR,
    LEGACY_VERSION_KEYS,
    RAW_DIR,
    RESULT_COLUMNS,
    RESULTS_CSV,
    SERVICE_DIR,
    RunFolder,
    RunStore,
    engine_facts,
    manifest_json,
)
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.measure.completion import count, row_problems
from pytest_ppsweep.redact import redact, redact_argv

SCHEMA = 1
PER_RUN = ("run", "reused_from")
_ABSENT = object()  # a field missing on one side (None is a known "unknown")


def deployment_facts(sweep: Sweep, config: Config) -> dict[str, Any]:
    """A layout of several server groups as its manifest records it: each group's role,
    shape and own server arguments, in start order, and its router (secrets redacted)."""
    deployment = config.deployment
    router = deployment.router
    return {
        "groups": [{"label": g.label, "role": g.role, "pp": g.pp, "tp": g.tp, "ep": g.ep,
                    "dp": g.dp, "server": redact(dict(g.flags))} for g in deployment.groups],
        "router": None if router is None else {
            "port": router.port, "node": router.node, "policy": router.policy,
            "flags": redact(dict(router.flags))},
        "transfer_backend": deployment.transfer_backend,
    }


def build(sweep: Sweep, cluster: Cluster, config: Config, image_id: str | None = None,
          engine_version: str | None = None,
          specs: Sequence[RankSpec] | None = None) -> dict[str, Any]:
    """The manifest of ``config`` on ``cluster`` (JSON-able, secrets redacted); ``specs``: the
    ranks' commands when the caller built them already (a boot: once, for the launch too)."""
    nodes = [{"node_rank": s.node_rank, "host": s.host, "address": s.address,
              **({"group": s.group} if s.group else {}),  # a layout of several groups
              "argv": redact_argv(s.argv), "env": dict(sorted(s.env.items()))}
             for s in (rank_specs(sweep, cluster, config) if specs is None else specs)]
    manifest = {
        "schema": SCHEMA,
        "config_id": config.id,
        "layout": config.deployment.columns(),
        "image": sweep.image,
        "image_id": image_id,
        "engine": config.engine,
        "engine_version": engine_version,
        "model_path": sweep.model_path,
        "server": sweep.server_args(config),
        "env": {**sweep.env, **cluster.env, **config.env},
        "workload": sweep.workload_of(config).as_json(),
        "cluster": {
            "name": cluster.name, "kind": cluster.kind, "launcher": cluster.launcher,
            "hosts": [{"name": h.name, "address": h.address} for h in cluster.hosts],
            "gpus_per_node": cluster.gpus_per_node, "server_module": cluster.server_module,
            "python": cluster.python, "port": cluster.port,
            "dist_init_port": cluster.dist_init_port, "devices": list(sweep.devices),
        },
        "nodes": nodes,
    }
    if sweep.boots > 1:  # [sweep] boots: the rounds of K boots (absent: one, as before)
        manifest["boots"] = sweep.boots
    if config.deployed is not None:  # a layout of several groups (absent: one serve group)
        manifest["deployment"] = deployment_facts(sweep, config)
    # The JSON round trip makes an in-memory manifest equal to one read back from disk.
    return json.loads(json.dumps(redact(manifest)))  # type: ignore[no-any-return]


def path(run_dir: Path, config_id: str) -> Path:
    """``<run_dir>/metadata/<config>.manifest.json``."""
    return Path(run_dir) / manifest_json(config_id)


def write(run_dir: Path, config_id: str, manifest: dict[str, Any]) -> Path:
    """Write the manifest with its per-run ``run`` block (run id, time) added."""
    data = {**manifest, "run": {"run_id": Path(run_dir).name,
                                "written": datetime.now(UTC).isoformat()}}
    target = path(run_dir, config_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


def load(run_dir: Path, config_id: str) -> dict[str, Any] | None:
    """The stored manifest, or None when the run has none for ``config_id``."""
    p = path(run_dir, config_id)
    if not p.is_file():
        return None
    data = json.loads(p.read_text(encoding="utf-8"))
    return current(data) if isinstance(data, dict) else None


def current(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest of any run folder format in today's fields: one written before manifests
    named the engine held the engine's version under its own key (``engine_facts``), so it
    reads as that engine and its ``engine_version`` (a reference of an earlier format compares
    field by field with today's)."""
    if "engine" in data:
        return data
    engine, version = engine_facts(data)
    out = {k: v for k, v in data.items() if k not in LEGACY_VERSION_KEYS}
    return {**out, "engine": engine, "engine_version": version}


def _flat(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            _flat(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def _argv_fields(argv: list[str]) -> dict[str, Any]:
    """argv as ``python``, ``-m`` and one entry per flag, so a diff names the flag."""
    out: dict[str, Any] = {"python": argv[0] if argv else None}
    i = 1
    while i < len(argv):
        tok = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        takes = nxt is not None and not (nxt.startswith("-") and not _number(nxt))
        if tok.startswith("-"):
            out[tok] = nxt if takes else True
            i += 2 if takes else 1
        else:
            out[f"[{i}]"] = tok
            i += 1
    return out


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fields(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    top: dict[str, Any] = {}
    _flat({k: v for k, v in manifest.items() if k not in (*PER_RUN, "nodes")}, "", top)
    nodes: dict[str, dict[str, Any]] = {}
    for node in manifest.get("nodes") or []:
        flat: dict[str, Any] = {"host": node.get("host"), "address": node.get("address")}
        flat.update({f"argv.{k}": v for k, v in _argv_fields(list(node.get("argv") or [])).items()})
        flat.update({f"env.{k}": v for k, v in (node.get("env") or {}).items()})
        nodes[str(node.get("node_rank"))] = flat
    return top, nodes


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    if value is None:
        return "(unknown)"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _differ(a: Any, b: Any) -> bool:
    # True == 1 in Python, but a bare flag and a value 1 are different server arguments.
    return bool(a != b or isinstance(a, bool) != isinstance(b, bool))


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Every field that differs, as ``"server.chunked_prefill_size: 8192 → 16384"`` (a → b).

    Only the per-run ``run`` block is ignored. A node-level difference already told by a
    top-level one with the same two values (a server flag, a matrix env var) is not repeated,
    and one shared by every node is written once as ``nodes.<field>``.
    """
    (top_a, nodes_a), (top_b, nodes_b) = _fields(a), _fields(b)
    lines, told = [], set()
    for key in dict.fromkeys([*top_a, *top_b]):
        va, vb = top_a.get(key, _ABSENT), top_b.get(key, _ABSENT)
        if _differ(va, vb):
            lines.append(f"{key}: {_show(va)} → {_show(vb)}")
            told.add((_show(va), _show(vb)))
    per_field: dict[tuple[str, str, str], list[str]] = {}
    ranks = list(dict.fromkeys([*nodes_a, *nodes_b]))
    for rank in ranks:
        fa, fb = nodes_a.get(rank, {}), nodes_b.get(rank, {})
        for key in dict.fromkeys([*fa, *fb]):
            va, vb = fa.get(key, _ABSENT), fb.get(key, _ABSENT)
            pair = (_show(va), _show(vb))
            if _differ(va, vb) and pair not in told:
                per_field.setdefault((key, *pair), []).append(rank)
    for (key, sa, sb), where in per_field.items():
        name = "nodes" if len(where) == len(ranks) > 1 else "node" + ",".join(where)
        lines.append(f"{name}.{key}: {sa} → {sb}")
    return lines


def _read_rows(csv_path: Path) -> list[dict[str, str]]:
    """Complete rows of a CSV written row by row; a torn last line (a kill) is dropped."""
    if not csv_path.is_file():
        return []
    text = csv_path.read_text(encoding="utf-8")
    text = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text))
    return [r for r in reader if None not in r and None not in r.values()]


def finished_rounds(run_dir: Path) -> set[tuple[str, int, int]]:
    """(config id, concurrency, repeat) of every round recorded in ``results.csv``."""
    done = set()
    for row in _read_rows(Path(run_dir) / RESULTS_CSV):
        try:
            done.add((row["config_id"], int(row["concurrency"]), int(row["repeat"])))
        except (KeyError, ValueError):
            continue  # a row mangled by hand or by a kill: that round runs again
    return done


def repair_torn_tail(run_dir: Path) -> bool:
    """Cut a torn last line off ``results.csv`` so appended rows start on a line of their own.

    Call before resuming into the folder; True when something was cut.
    """
    csv_path = Path(run_dir) / RESULTS_CSV
    if not csv_path.is_file():
        return False
    data = csv_path.read_bytes()
    if not data or data.endswith(b"\n"):
        return False
    csv_path.write_bytes(data[: data.rfind(b"\n") + 1])
    return True


def _valid(row: dict[str, str], num_requests: int) -> bool:
    # The reference round counts (the N/N rule) and sent this run's N.
    return count(row.get("num_requests")) == num_requests and not row_problems(row)


def reusable(ref_run_dir: Path, config_id: str, manifest: dict[str, Any]
             ) -> tuple[bool, list[str]]:
    """Whether ``config_id``'s rounds of the reference run can stand for this run; why not.

    Refused on any manifest difference, on a reference that booted badly or logged fatal lines,
    and unless every repeat of every C completed N/N there.
    """
    ref = load(ref_run_dir, config_id)
    if ref is None:
        return False, [f"{path(ref_run_dir, config_id)}: no manifest for {config_id}"]
    cand = current(dict(manifest))
    # The engine's version is read at boot; an identical known image id pins it before boot.
    if (cand.get("engine_version") is None and cand.get("image_id")
            and cand.get("image_id") == ref.get("image_id")):
        cand["engine_version"] = ref.get("engine_version")
    reasons = differences(ref, cand)
    facts = RunFolder(ref_run_dir).config_rows().get(config_id, {})
    for column, what in (("boot_ok", "did not boot"), ("topology_ok", "had a wrong topology"),
                         ("log_clean", "had fatal log lines")):
        if facts.get(column, "").lower() in ("false", "0"):
            reasons.append(f"{config_id} {what} in the reference run ({column} = False)")
    workload = manifest.get("workload") or {}
    n, repeats = int(workload.get("num_requests", 0)), int(workload.get("repeats", 0))
    repeats *= int(manifest.get("boots") or 1)  # [sweep] boots: the rounds of every boot
    rows = [r for r in _read_rows(Path(ref_run_dir) / RESULTS_CSV)
            if r["config_id"] == config_id]
    for conc in workload.get("concurrency") or []:
        ok = {int(r["repeat"]) for r in rows if r["concurrency"] == str(conc) and _valid(r, n)}
        missing = [r for r in range(1, repeats + 1) if r not in ok]
        if missing:
            reasons.append(f"{config_id} C={conc}: repeat(s) {', '.join(map(str, missing))} "
                           f"not completed {n}/{n} in the reference run")
    return not reasons, reasons


def reused_rows(ref_run_dir: Path, config_id: str, run_id: str) -> list[dict[str, str]]:
    """The reference's results.csv rows of ``config_id`` as rows of run ``run_id``, marked
    ``reused``."""
    return [{**{k: row.get(k, "") for k in RESULT_COLUMNS}, "run_id": run_id, "reused": "True"}
            for row in _read_rows(Path(ref_run_dir) / RESULTS_CSV)
            if row["config_id"] == config_id]


def adopt(ref_run_dir: Path, store: RunStore, config_id: str, manifest: dict[str, Any]) -> int:
    """Take ``config_id``'s results, facts and evidence from the reference into ``store``.

    Call only after :func:`reusable` said yes. Returns the number of rounds taken.
    """
    ref = Path(ref_run_dir)
    rows = reused_rows(ref, config_id, store.run_id)
    for row in rows:
        store.append_result(row)
    facts = RunFolder(ref).config_rows().get(config_id, {})
    # held_s is the cluster time this run spent on the layout: none (a later pool plan reads
    # the reference's own measurement from the reference run).
    store.update_config(config_id, **{k: v for k, v in facts.items() if k in CONFIG_COLUMNS
                                      and k not in ("config_id", "order", "held_s")})
    for sub in (SERVICE_DIR, RAW_DIR, GPU_DIR):
        if (ref / sub / config_id).is_dir():
            shutil.copytree(ref / sub / config_id, store.dir / sub / config_id, dirs_exist_ok=True)
    write(store.dir, config_id, {**manifest, "reused_from": str(ref.resolve())})
    return len(rows)


def _written(run_dir: Path, config_id: str) -> str:
    # When the earlier run wrote the layout's manifest (its boot); the folder's time otherwise.
    try:
        data = load(run_dir, config_id) or {}
    except (OSError, ValueError):
        data = {}
    block = data.get("run")
    stamp = block.get("written") if isinstance(block, dict) else None
    if isinstance(stamp, str) and stamp:
        return stamp
    return datetime.fromtimestamp(Path(run_dir).stat().st_mtime, UTC).isoformat()


def earlier_baseline(root: Path, config_id: str, wanted: dict[str, Any],
                     exclude: Path | None = None) -> tuple[Path | None, list[str]]:
    """The newest run folder in ``root`` whose ``config_id`` could stand for this run's
    (:func:`reusable` with ``wanted``, the manifest this run would write for it), and why each
    newer one could not (``"<run id>: <difference>; …"``)."""
    root = Path(root)
    if not root.is_dir():
        return None, []
    skip = Path(exclude).resolve() if exclude is not None else None
    runs = [p for p in root.iterdir()
            if p.is_dir() and path(p, config_id).is_file() and p.resolve() != skip]
    skipped: list[str] = []
    for run in sorted(runs, key=lambda p: (_written(p, config_id), p.name), reverse=True):
        ok, reasons = reusable(run, config_id, wanted)
        if ok:
            return run, skipped
        skipped.append(f"{run.name}: " + "; ".join(reasons))
    return None, skipped
