"""Before the first boot (pytest_runtestloop, once the selection is known; under xdist once
the first worker's collection told it, before any test is scheduled), controller: the run's
claims on its clusters (session/claims.py), then the leftovers of earlier runs are reported or
reaped, every node of every cluster is checked at once, and what is found is kept in the run
folder; at the end, what this run left on ssh nodes is removed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep.folder.runfolder import nodes_json
from pytest_ppsweep.session import options
from pytest_ppsweep.session.claims import Claims
from pytest_ppsweep.session.quiet import Quiet

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster

__all__ = ["Preflight"]


class Preflight(Claims, Quiet):
    """The session's checks before the first boot, and its cleanup after the last."""

    preflown: bool
    selected: dict[str, set[int]] | None

    def preflight(self) -> None:
        """Leftovers of earlier runs (ssh clusters: by label; local clusters: labelled ranks on
        this cluster's addresses and ports) are reported, or removed with --ppsweep-reap; then
        every node of every cluster is checked at once (free ports included). Any problem is a
        usage error listing all of them, and nothing is booted. Once; never in a run that boots
        nothing (:mod:`.quiet`)."""
        if self.worker or self.config.option.collectonly or self.quiet or self.preflown:
            return
        if not self.selected:  # an xdist controller before its workers' collection, or empty
            return
        self.preflown = True
        with self.refusal():  # a refused claim or node: no run folder is left (session.quiet)
            self._preflight()

    def _preflight(self) -> None:
        from pytest_ppsweep.cluster import nodeinfo, preflight, reap

        self._claim_clusters()  # one sweep per cluster: before anything looks at the nodes
        for cluster in self.pool:
            if cluster.kind in ("ssh", "slurm"):
                # a node that cannot be asked is left to the preflight, which reports it
                leftovers = reap.find(cluster, errors=[], registry=self.registry)
                leftovers = self._stop_own_leftovers(cluster, leftovers)
            else:
                # this machine is shared: only the ranks of other runs that collide with this
                # cluster's addresses and ports (a busy port is then refused by the preflight)
                leftovers = reap.find_blocking(cluster, exclude_run=self.store.run_id)
            if leftovers:
                if self.config.getoption("ppsweep_reap"):
                    failed = reap.remove(cluster, leftovers, registry=self.registry)
                    if failed:
                        raise pytest.UsageError(
                            f"--ppsweep-reap: cluster {cluster.name}: could not remove:\n"
                            + "\n".join(f"  - {f}" for f in failed)
                        )
                    self.progress(
                        f"cluster {cluster.name}: removed {len(leftovers)} leftover rank(s) of "
                        "earlier runs:\n" + reap.describe(leftovers)
                    )
                else:
                    self.progress(
                        f"WARNING: cluster {cluster.name}: {len(leftovers)} rank(s) of earlier "
                        f"runs are still on the nodes (remove them with --ppsweep-reap):\n"
                        + reap.describe(leftovers)
                    )
            problems = preflight.check(self.sweep, cluster, self.registry)
            if problems:
                raise pytest.UsageError(preflight.message(cluster, problems))
            self.store.write_json(
                nodes_json(cluster.name),
                nodeinfo.metadata(self.sweep, cluster, self.registry),
            )

    def _stop_own_leftovers(self, cluster: Cluster, leftovers: list[Any]) -> list[Any]:
        """--ppsweep-resume on an ssh cluster: the ranks the interrupted run itself left (a
        SIGKILLed pytest tears nothing down) are stopped first, as ``continuity.plan.resume``
        does for local ranks; without this the resume's preflight refused the run's own
        containers as busy ports. Other runs' leftovers are returned: they stay the user's to
        reap. A fresh run id never matches a leftover, so only a resume stops anything."""
        from pytest_ppsweep.cluster import reap

        if not options.get(self.config, "ppsweep_resume"):
            return leftovers
        own = [x for x in leftovers if x.run == self.store.run_id]
        if not own:
            return leftovers
        failed = reap.remove(cluster, own, registry=self.registry)
        if failed:
            raise pytest.UsageError(
                f"--ppsweep-resume: cluster {cluster.name}: could not stop the ranks the "
                "interrupted run left:\n" + "\n".join(f"  - {f}" for f in failed)
            )
        self.progress(
            f"cluster {cluster.name}: stopped {len(own)} rank(s) left by the interrupted run "
            f"{self.store.run_id}:\n" + reap.describe(own)
        )
        return [x for x in leftovers if x.run != self.store.run_id]

    def _reap_own(self) -> None:
        # Whatever this run still has on the nodes of an ssh cluster (a rank whose start was
        # interrupted, a worker that crashed) is removed by its run label.
        from pytest_ppsweep.cluster import reap

        for cluster in self.pool:
            if cluster.kind not in ("ssh", "slurm"):
                continue
            errors: list[str] = []
            left = reap.find(
                cluster, run_id=self.store.run_id, errors=errors, registry=self.registry
            )
            failed = reap.remove(cluster, left, registry=self.registry) if left else []
            for problem in errors + failed:
                sys.stderr.write(f"ppsweep: cleanup of cluster {cluster.name}: {problem}\n")
