"""``metadata/run.json``, what the report needs to know about a run: its one owner. The run
folder's set-up writes it, the first boot adds the server's facts, the collection the selection,
the adaptive sweep its skips; the results layer reads it (results/aggregate.RunMeta)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ppsweep.matrix.axes import point_facts
from pytest_ppsweep.matrix.model import Cluster, Sweep
from pytest_ppsweep.measure.runstore import RunStore

__all__ = ["RUN_JSON", "RunJson", "axis_fields", "run_id_of"]

RUN_JSON = "metadata/run.json"


LEARNT_AT_BOOT = ("sglang_version", "time_scale", "simulated")  # from the first boot's server info


class RunJson:
    """``metadata/run.json`` of one run folder: created once, then merged into."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.dir / RUN_JSON

    def create(self, sweep: Sweep, pool: tuple[Cluster, ...], ids: list[str]) -> None:
        """What the report needs to know about the run (updated at each boot). A resumed run's
        run.json keeps what it recorded (the selection, what its boots learnt: the server's
        version and time scale) until this run records it anew: a resume that boots nothing,
        or is refused before its first boot, loses none of it."""
        simulated = all(c.server_module.startswith("pytest_ppsweep.sim") for c in pool)
        try:
            kept = self.read() if self.path.is_file() else {}
        except ValueError:  # a torn file: written anew
            kept = {}
        self.store.write_json(
            RUN_JSON,
            kept | {
                "run_id": self.store.run_id,
                "sweep": sweep.name,
                "baseline": sweep.baseline,
                "order": ids,
                "cluster": ",".join(c.name for c in pool),
                "hosts": [h.address for c in pool for h in c.hosts],
                "simulated": simulated,
                # The real factor comes from the server info of the first boot.
                "time_scale": 1.0,
                "image": sweep.image,
                "model_path": sweep.model_path,
                "matrix": str(sweep.path),
                "spread_threshold": sweep.spread_threshold,
                "min_repeats": sweep.min_repeats,
                "spread_rule": sweep.spread_rule,
                "max_repeats": sweep.max_repeats,
                # the decision rule's parameters (results/questions.rule_of reads them)
                "compare": {"alpha": sweep.compare_alpha,
                            "min_effect_pct": sweep.compare_min_effect_pct},
                "workload": json.loads(json.dumps(sweep.workload.as_json())),
                "gpu_hour_usd": sweep.gpu_hour_usd,
                "sglang_version": None,
                **axis_fields(sweep),
            } | {key: kept[key] for key in LEARNT_AT_BOOT if key in kept},
        )

    def read(self) -> dict[str, Any]:
        raw = json.loads(self.path.read_text(encoding="utf-8"))
        return raw if isinstance(raw, dict) else {}

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into run.json (under the run folder's lock)."""
        self.store.update_json(RUN_JSON, **fields)

    def server(self, version: Any, simulated: bool, time_scale: float) -> None:
        """What a booted server says about itself (every boot; the same for every layout)."""
        self.update(sglang_version=version, simulated=simulated, time_scale=time_scale)

    def adaptive(self, min_repeats: int) -> None:
        """--ppsweep-adaptive: a point whose third repeat the planner skipped has two."""
        self.update(adaptive=True, min_repeats=min_repeats)

    def run_status(self, status: str, detail: Mapping[str, Any] | None = None) -> None:
        """The run's status (``running``, then ``complete``, ``partial`` or ``interrupted``)
        and its detail (results/runstatus.RunStatus.detail: the points measured and missing,
        where it was interrupted, the resume command); None while it runs."""
        self.update(run_status=status, run_status_detail=dict(detail) if detail else None)

    def drop_skipped(self, skipped: Mapping[str, str]) -> None:
        """The layouts the adaptive sweep predicted but did not measure leave the selection."""
        chosen = self.read().get("selected")
        if isinstance(chosen, dict):
            self.update(selected={k: v for k, v in chosen.items() if k not in skipped},
                        adaptive_skipped=dict(skipped))


def run_id_of(folder: Path) -> str:
    """The run id in ``folder``'s run.json (a named baseline keeps its run's), else its name."""
    try:
        raw = json.loads((folder / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return folder.name
    return str(raw.get("run_id") or folder.name) if isinstance(raw, dict) else folder.name


def axis_fields(sweep: Sweep) -> dict[str, Any]:
    """run.json keys of an axis sweep (results/confound.py reads them): each point's layout,
    axis values and workload, the axes, the comparison baselines and the named workloads."""
    if not (sweep.axis_names or sweep.workloads or any(c.tags or c.asked_ep
                                                       for c in sweep.configs)):
        return {}
    named = sweep.workloads or {}
    return {
        "points": point_facts(sweep.configs),
        "axes": list(sweep.axis_names),
        "compare_baseline": dict(sweep.compare_baseline),
        "workloads": {n: json.loads(json.dumps(w.as_json())) for n, w in named.items()},
        "concurrencies": list(dict.fromkeys(
            c for w in (named.values() or [sweep.workload]) for c in w.concurrency)),
    }
