"""One sweep per cluster (cluster/claim.py), the session's side: before its preflight the
controller claims every cluster of its pool, kept by a heartbeat until the session closes; the
xdist pool's leases then hand the claimed clusters to the workers (which claim nothing). A
cluster another sweep holds: wait (--ppsweep-wait-cluster, in the live status) or refuse before
anything is launched. A cluster put on new nodes during the run (a Slurm allocation renewed
before a layout) takes its claim along; a new node another live run holds stops the sweep
(resumable). Under xdist a worker's renewal does not move the controller's claim: it stays on
the old nodes and goes stale there."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_ppsweep.cluster.base import ClusterStop, HostError
from pytest_ppsweep.cluster.claim import ClusterBusy, claim_all
from pytest_ppsweep.folder.runfolder import CLAIM_LOST_JSON
from pytest_ppsweep.session import options

if TYPE_CHECKING:
    from pytest_ppsweep.cluster.claim import Claim
    from pytest_ppsweep.matrix.model import Cluster
    from pytest_ppsweep.run.context import RunContext
    from pytest_ppsweep.session.progress import Progress

__all__ = ["Claims"]

STATUS_KEY = "cluster claim"


class Claims:
    """Take the run's claims on its clusters, and give them back."""
    def __init__(self, config: pytest.Config, matrix: Path, ctx: RunContext,
                 progress: Progress) -> None:
        self.config = config
        self.matrix = matrix
        self.ctx = ctx
        self.progress = progress
        self.held: list[Claim] = []  # this run's claims (controller; empty until the preflight)

    def claim(self) -> None:
        wait_s = options.wait_cluster_s(self.config)
        bound = "" if wait_s == float("inf") else f" of {wait_s:g}"

        def waiting(message: str, waited: float) -> None:
            self.progress.status(STATUS_KEY, f"waiting ({waited:.0f} s{bound}): {message}",
                                 state=message.split(" (heartbeat")[0])

        def lost(claim: Claim) -> None:  # the verdicts mark the rounds since INVALID
            self.ctx.store.update_json(CLAIM_LOST_JSON, **{claim.cluster.name: {
                "since": claim.lost_since, "why": claim.lost}})

        try:
            self.held = claim_all(self.ctx.clusters.all, self.ctx.store.run_id,
                                  self.ctx.registry, wait_s=wait_s, on_wait=waiting,
                                  say=self.progress.warn, on_lost=lost)
        except ClusterBusy as exc:
            raise pytest.UsageError(f"{exc}; nothing was launched (wait for it with "
                                    "--ppsweep-wait-cluster [SECONDS])") from None
        except HostError as exc:  # node 0 holds the claim: a node that cannot be reached
            raise pytest.UsageError(f"{self.matrix}: cannot take the run's claim on its "
                                    f"cluster: {exc}; nothing was launched") from None
        finally:
            self.progress.end(STATUS_KEY)
        self.ctx.clusters.watch(self.moved)

    def moved(self, cluster: Cluster) -> None:
        """``cluster`` is on new nodes (a new allocation before a layout): its claim goes with
        it, or the sweep stops (ClusterStop, resumable) when another live run holds one of
        them or they cannot be asked."""
        for claim in self.held:
            if claim.cluster.name != cluster.name:
                continue
            said = len(claim.warnings)
            try:
                claim.move(cluster, self.ctx.registry)
            except (ClusterBusy, HostError) as exc:
                raise ClusterStop(f"cluster {cluster.name}: cannot move the run's claim to its "
                                  f"new nodes: {exc}") from None
            for warning in claim.warnings[said:]:  # a dead run's claim on a new node
                self.progress.warn(warning)
            self.progress(f"cluster {cluster.name}: the run's claim moved to "
                          f"{', '.join(h.name for h in cluster.hosts)}")

    def release(self) -> None:
        """Give the claims back (the ranks stopped and reaped first); a claim another run
        took over meanwhile (this run looked dead) is said on stderr."""
        for claim in self.held:
            if claim.lost:
                sys.stderr.write(f"ppsweep: WARNING: cluster {claim.cluster.name}: "
                                 f"{claim.lost} during this run (the rounds measured since "
                                 "are INVALID: the cluster was shared)\n")
            claim.release()
        self.held = []
