"""configs.csv's row of one layout: every column the run writes is named here, once (the columns
themselves are ``folder.runfolder.CONFIG_COLUMNS``). Each fact is noted as it is learnt (one line
of the run folder's facts journal, the crash-safe copy); configs.csv is written once a phase of
the layout ends: its boot (``held`` follows a boot, a failed one too), a test that stopped the
service (``held``), its teardown (``held``), a boot failure, a layout that never ran."""

from __future__ import annotations

from typing import Any

from pytest_ppsweep.folder.runfolder import RunStore
from pytest_ppsweep.matrix.model import Config
from pytest_ppsweep.measure.gpu import WorstRank

__all__ = ["ConfigRow"]


class ConfigRow:
    """The facts of one layout in ``configs.csv`` (merged into its row as they come)."""

    def __init__(self, store: RunStore, config_id: str) -> None:
        self.store = store
        self.config_id = config_id

    def _write(self, **facts: Any) -> None:
        self.store.note_config(self.config_id, **facts)

    def _write_now(self, **facts: Any) -> None:
        """The last fact of a phase: configs.csv gets the layout's row as known now."""
        self.store.update_config(self.config_id, **facts)

    def planned(self, config: Config) -> None:
        """Before the boot: the layout, its place in the sweep, not booted yet."""
        self._write(**config.deployment.columns(), order=config.order, boot_ok=False)

    def placed(self, cluster: str) -> None:
        """The cluster the layout boots on."""
        self._write(cluster=cluster)

    def boot_failed(self, boot_s: float | None, reason: str) -> None:
        self._write_now(boot_s=boot_s, boot_error=reason)

    def topology(self, ok: bool) -> None:
        """Whether the server reports the topology the matrix asked for."""
        self._write(topology_ok=ok)

    def booted(self, boot_s: float | None, pp_max_micro_batch_size: Any) -> None:
        self._write(boot_ok=True, boot_s=boot_s, boot_error="",
                    pp_max_micro_batch_size=pp_max_micro_batch_size)

    def kv_capacity(self, tokens: int | None, request_tokens: int) -> None:
        """The KV cache's capacity the engine reports, in tokens, and the requests of
        ``request_tokens`` (the workload's input + output) it holds at once; nothing when the
        engine reports none."""
        if tokens is None or tokens <= 0:
            return
        self._write(kv_tokens=tokens,
                    kv_requests=tokens // request_tokens if request_tokens > 0 else "")

    def boot_of(self, config_id: str) -> None:
        """The point whose boot this point was measured on: itself, or a point of the same
        server configuration with another workload (run/boots.py)."""
        self._write(boot_of=config_id)

    def held(self, seconds: float) -> None:
        """The cluster time the layout took so far (real seconds)."""
        self._write_now(held_s=round(seconds, 3))

    def logs(self, findings: int) -> None:
        """What the log scan found after the layout's tests."""
        self._write(log_clean=not findings, log_findings=findings)

    def memory(self, worst: WorstRank) -> None:
        """The most loaded GPU after the benchmark (seed §8)."""
        self._write(
            mem_peak_mib=worst.used_mib,
            mem_total_mib=worst.total_mib,
            mem_headroom_mib=worst.headroom_mib,
            mem_worst_node=worst.node,
            mem_worst_gpu=worst.index,
        )

    def not_run(self, why: str) -> None:
        """The layout never ran (its worker's cluster left the pool)."""
        self._write_now(boot_error=f"not run: {why}")
