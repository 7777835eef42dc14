"""The run folder: every result is written the moment it is produced.

A crash or Ctrl-C therefore keeps every finished round: ``results.csv`` gains one flushed row per
round, raw per-request JSONL lines are appended as requests complete, and ``configs.csv`` is
rewritten atomically whenever a fact about a configuration is learnt.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from pytest_ppsweep.redact import redact_toml

RESULT_COLUMNS = (
    "run_id",
    "config_id",
    "pp",
    "tp",
    "ep",
    "concurrency",
    "repeat",
    "num_requests",
    "completed",
    "failed",
    "duration_s",
    "input_tokens",
    "input_tokens_nominal",
    "input_tps",
    "input_tps_nominal",
    "output_tokens",
    "output_tokens_nominal",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "tpot_mean_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "itl_mean_s",
    "itl_p50_s",
    "itl_p99_s",
    "output_tps",
    "peak_concurrency",
    "prompt_digest",
    "time_scale",
    "simulated",
    "reused",
    # True for a round beyond the planned repeats (adaptive repeats, results/spread.py).
    "extra",
)
CONFIG_COLUMNS = (
    "config_id",
    "pp",
    "tp",
    "ep",
    "order",
    "boot_ok",
    "boot_s",
    "boot_error",
    "topology_ok",
    "pp_max_micro_batch_size",
    "log_clean",
    "log_findings",
    "mem_peak_mib",
    "mem_total_mib",
    "mem_headroom_mib",
    "mem_worst_node",
    "mem_worst_gpu",
    "cluster",
    "held_s",
    "boot_of",
)


def new_run_id(name: str, now: datetime | None = None) -> str:
    """``<sweep name>-YYYYmmdd-HHMMSS`` like the seeds' run ids."""
    return f"{name}-{(now or datetime.now()).strftime('%Y%m%d-%H%M%S')}"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class RunStore:
    """Owns ``reports/<run_id>/`` for one run."""

    def __init__(self, root: Path, run_id: str) -> None:
        self.run_id = run_id
        self.dir = root / run_id
        for sub in ("metadata", "service", "raw", "gpu", "bench"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    @property
    def results_csv(self) -> Path:
        return self.dir / "results.csv"

    @property
    def configs_csv(self) -> Path:
        return self.dir / "configs.csv"

    def service_dir(self, config_id: str) -> Path:
        return self.dir / "service" / config_id

    def raw_path(self, config_id: str, concurrency: int, repeat: int) -> Path:
        path = self.dir / "raw" / config_id / f"c{concurrency}-r{repeat}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def gpu_path(self, config_id: str, moment: str) -> Path:
        path = self.dir / "gpu" / config_id / f"{moment}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write_json(self, relpath: str, data: Any) -> Path:
        path = self.dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        return path

    def update_json(self, relpath: str, **fields: Any) -> None:
        """Merge ``fields`` into a JSON object file of the run folder."""
        path = self.dir / relpath
        with self.locked():
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            data.update(fields)
            _atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")

    def copy_matrix(self, matrix: Path, shared: Iterable[Path] = ()) -> None:
        """The sweep file as evidence, and beside it the ``shared`` files its ``extends`` took
        tables from (each under its own name, so a copy of ``extends = "cluster.toml"`` reads
        as the sweep did; a name taken already gets an ``extends-<n>-`` prefix), with the
        values of secret-looking keys redacted."""
        copies = {matrix.name: matrix}
        for path in shared:
            name = path.name if path.name not in copies else f"extends-{len(copies)}-{path.name}"
            copies[name] = path
        for name, path in copies.items():
            text = path.read_text(encoding="utf-8")
            _atomic_write(self.dir / "metadata" / name, redact_toml(text))

    def append_result(self, row: Mapping[str, Any]) -> None:
        """One round, flushed to disk before returning."""
        unknown = set(row) - set(RESULT_COLUMNS)
        if unknown:
            raise ValueError(f"results.csv: unknown columns {sorted(unknown)}")
        with self.locked():
            new = not self.results_csv.exists() or self.results_csv.stat().st_size == 0
            columns = RESULT_COLUMNS if new else self._results_header()
            with self.results_csv.open("a", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
                if new:
                    writer.writeheader()
                writer.writerow({k: _cell(row.get(k)) for k in columns})
                fh.flush()
                os.fsync(fh.fileno())

    def _results_header(self) -> tuple[str, ...]:
        """The columns results.csv was started with: a folder written by an older runstore
        (resumed) keeps its header, so a new round never shifts its cells under the old names.
        """
        with self.results_csv.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
        return tuple(header) if header else RESULT_COLUMNS

    def update_config(self, config_id: str, **facts: Any) -> None:
        """Merge facts about a configuration into ``configs.csv`` (rewritten atomically)."""
        unknown = set(facts) - set(CONFIG_COLUMNS)
        if unknown:
            raise ValueError(f"configs.csv: unknown columns {sorted(unknown)}")
        with self.locked():
            rows = self.config_rows()
            row = rows.setdefault(config_id, {"config_id": config_id})
            row.update({k: _cell(v) for k, v in facts.items()})
            ordered = sorted(rows.values(), key=lambda r: _order_key(r.get("order")))
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=CONFIG_COLUMNS)
            writer.writeheader()
            for r in ordered:
                writer.writerow({k: r.get(k, "") for k in CONFIG_COLUMNS})
            _atomic_write(self.configs_csv, out.getvalue())

    def result_rows(self) -> list[dict[str, str]]:
        """results.csv as rows of strings ([] before the first round); a line being appended
        is left out."""
        if not self.results_csv.exists():
            return []
        with self.results_csv.open(newline="", encoding="utf-8") as fh:
            return [dict(r) for r in csv.DictReader(fh) if None not in r.values()]

    def config_rows(self) -> dict[str, dict[str, Any]]:
        """configs.csv as {config id: row}."""
        if not self.configs_csv.exists():
            return {}
        with self.configs_csv.open(newline="", encoding="utf-8") as fh:
            return {row["config_id"]: dict(row) for row in csv.DictReader(fh)}

    def sort_results(self, order: list[str]) -> None:
        """Rewrite results.csv in sweep order (xdist workers append in completion order)."""
        if not self.results_csv.exists():
            return
        rank = {cid: i for i, cid in enumerate(order)}
        with self.locked():
            with self.results_csv.open(newline="", encoding="utf-8") as fh:
                rows = [r for r in csv.DictReader(fh) if None not in r.values()]
            rows.sort(
                key=lambda r: (
                    rank.get(r["config_id"], len(rank)),
                    int(r["concurrency"]),
                    int(r["repeat"]),
                )
            )
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=RESULT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
            _atomic_write(self.results_csv, out.getvalue())

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive access to the run folder's shared files, across threads and processes."""
        with self._lock, (self.dir / ".lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def open_raw(self, config_id: str, concurrency: int, repeat: int) -> TextIO:
        return self.raw_path(config_id, concurrency, repeat).open("w", encoding="utf-8")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e-3 and value != 0 else round(value, 6)
    return value


def _order_key(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 1 << 30
