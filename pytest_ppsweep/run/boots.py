"""One boot per server configuration: the points that differ only in their workload
(``matrix.model.server_key``) run on one boot of their layout, one workload after the other,
and it is torn down once, after the last of them.

The boot is made by the first point of its server configuration that needs it (the *boot id*;
its service, logs, phases and boot time are under that point's id). Each later point of the
same server configuration *joins* it: its configs.csv row says so (``boot_of``, no boot time of
its own, so neither cluster time nor boot time is counted twice), its manifest is written as
for a boot of its own (reuse and resume compare it the same way), and at teardown it gets the
boot's log scan and memory facts. A failed boot fails every point of its server configuration
without booting again. A point asks for its boot (:meth:`Boots.acquire`) and says when its
tests are done (:meth:`Boots.release`); the boot stops when no point that still expects it
(:meth:`Boots.expect`, this process's selected points) is left, before a boot of another
server configuration, or at :meth:`Boots.close`.

With ``[sweep] boots`` > 1 (--ppsweep-boots) each server configuration is booted that many
times; a boot is then the pair (server configuration, boot number), and a later boot number is
a new boot even when the same configuration is up. A server configuration whose boot failed is
not booted again for its later boot numbers: they fail with the same cause.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pytest_ppsweep.continuity import manifest
from pytest_ppsweep.folder.runfolder import PHASES_JSON
from pytest_ppsweep.matrix.model import Config, server_key
from pytest_ppsweep.measure.configrow import ConfigRow
from pytest_ppsweep.run.booted import Booted
from pytest_ppsweep.run.context import RunContext
from pytest_ppsweep.run.lifecycle import Lifecycle
from pytest_ppsweep.service.readiness import BootFailed

__all__ = ["Boots"]

# The facts of a boot that every point measured on it shares (copied from the boot id's row).
_AT_BOOT = ("boot_ok", "topology_ok", "pp_max_micro_batch_size", "cluster")
_AT_TEARDOWN = ("log_clean", "log_findings", "mem_peak_mib", "mem_total_mib",
                "mem_headroom_mib", "mem_worst_node", "mem_worst_gpu")


@dataclass
class _Up:
    """The boot of one server configuration and the points measured on it so far."""

    key: str
    boot_id: str
    booted: Booted | None
    failure: BootFailed | None = None
    points: list[str] = field(default_factory=list)
    boot_no: int = 1


class Boots:
    """The boot this process holds, shared by the points of its server configuration."""

    def __init__(self, ctx: RunContext, lifecycle: Lifecycle) -> None:
        self.ctx = ctx
        self.lifecycle = lifecycle
        self.current: _Up | None = None
        # (server key, boot number) → the points still expected to run on that boot here
        self._pending: dict[tuple[str, int], set[str]] = {}
        self._failed: dict[str, _Up] = {}  # server key → its failed boot (not booted again)
        self.count = 0  # boots made by this process (failed ones too)

    def expect(self, points: Iterable[Config | tuple[Config, int]]) -> None:
        """The points this process will measure (each one's tests ask for its boot), each with
        its boot number (a bare Config: boot 1): a boot stays up until the last of its points
        is released."""
        self._pending = {}
        for point in points:
            config, boot_no = point if isinstance(point, tuple) else (point, 1)
            self._pending.setdefault((server_key(config), boot_no), set()).add(config.id)

    def acquire(self, config: Config, boot_no: int = 1) -> Booted:
        """The boot ``config`` is measured on: the one up for its server configuration and boot
        number, else a new one (the boot up is torn down first). Raises :class:`BootFailed`
        when its server configuration's boot failed (in this boot or an earlier one)."""
        key = server_key(config)
        up = self.current
        if up is not None and (up.key != key or up.boot_no != boot_no or (
                up.booted is not None and (up.boot_id not in self.lifecycle.up
                                           or up.booted.dead is not None))):
            # another server configuration or boot number, stopped already (test_comm), or a
            # rank died: the next workload gets a boot of its own
            self._end(up)
            up = None
        if up is None and key in self._failed and boot_no > self._failed[key].boot_no:
            failed = self._failed[key]
            self.current = up = _Up(key, failed.boot_id, None, failed.failure,
                                    list(failed.points), boot_no=boot_no)
            self.ctx.progress(f"{config.id}: boot {boot_no} not made: boot "
                              f"{failed.boot_no} of this server configuration failed")
        if up is None:
            self.count += 1
            try:
                booted = self.lifecycle.boot(config, boot_no)
            except BootFailed as exc:
                self.current = _Up(key, config.id, None, exc, [config.id], boot_no=boot_no)
                self._failed.setdefault(key, self.current)
                raise
            booted.boot_no = boot_no
            self.current = _Up(key, config.id, booted, points=[config.id], boot_no=boot_no)
            ConfigRow(self.ctx.store, config.id).boot_of(config.id)
            return booted
        if config.id not in up.points:
            up.points.append(config.id)
            self._join(config, up)
        if up.failure is not None:
            raise up.failure
        assert up.booted is not None
        return up.booted.for_point(config)

    def release(self, config: Config, boot_no: int = 1) -> None:
        """``config``'s tests on its boot ``boot_no`` are done: the boot stops when no other
        point of its server configuration is still expected on it."""
        key = server_key(config)
        left = self._pending.get((key, boot_no), set())
        left.discard(config.id)
        up = self.current
        if up is not None and up.key == key and up.boot_no == boot_no and not left:
            self._end(up)

    def close(self) -> None:
        """The end of the session: the boot still up (if any) is torn down."""
        if self.current is not None:
            self._end(self.current)

    def _join(self, config: Config, up: _Up) -> None:
        """``config`` runs on ``up``'s boot: its row and manifest, and a progress line that
        names the boot."""
        row = ConfigRow(self.ctx.store, config.id)
        row.planned(config)
        row.boot_of(up.boot_id)
        if up.failure is not None:
            row.boot_failed(None, f"boot of {up.boot_id} (same server configuration) failed: "
                                  f"{up.failure.reason}")
            self.ctx.progress(f"{config.id}: not booted again: the boot of {up.boot_id} (same "
                          "server configuration) failed")
            return
        assert up.booted is not None
        cluster = up.booted.cluster
        manifest.write(self.ctx.store.dir, config.id, manifest.build(
            self.ctx.sweep, cluster, config))
        self._copy(up.boot_id, config.id, _AT_BOOT)
        workload = self.ctx.sweep.workload_of(config)  # its own requests' size
        row.kv_capacity(up.booted.topology.max_total_tokens,
                        workload.input_len + workload.output_len)
        self.ctx.progress(f"{config.id}: runs on the boot of {up.boot_id} (same server "
                      f"configuration {key_name(up.key)}; no new boot)")

    def _end(self, up: _Up) -> None:
        """Tear ``up`` down once; every point measured on it gets the boot's log scan and
        memory facts."""
        self.current = None
        if up.booted is None:
            return
        self.lifecycle.teardown(up.booted)  # a no-op when test_comm stopped it already
        for cid in up.points[1:]:
            self._copy(up.boot_id, cid, _AT_TEARDOWN)
            self.lifecycle.share_facts(up.boot_id, cid)
            self.lifecycle.held(cid, time.monotonic())  # its tests' time on the boot
            # its own phases (rounds, …; no launch, boot or teardown: those are the boot's)
            self.ctx.store.update_json(PHASES_JSON, **{cid: self.ctx.phases.row(cid)})

    def _copy(self, source: str, target: str, keys: tuple[str, ...]) -> None:
        row = self.ctx.store.config_rows().get(source, {})
        facts = {k: row[k] for k in keys if row.get(k, "") != ""}
        if facts:
            self.ctx.store.update_config(target, **facts)


def key_name(key: str) -> str:
    """The readable part of a server key (the point id without its workload)."""
    return key.split("#", 1)[0]
