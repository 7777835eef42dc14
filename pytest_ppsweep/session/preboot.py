"""Before the first boot (pytest_runtestloop, once the selection is known; under xdist once
the first worker's collection told it, before any test is scheduled), controller: the run's
claims on its clusters (session/claims.py), then the leftovers of earlier runs are reported or
reaped, every node of every cluster is checked at once, and what is found is kept in the run
folder; at the end, what this run left on ssh nodes is removed."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ppsweep.cluster.backends import backend_of
from pytest_ppsweep.cluster.base import ClusterStop
from pytest_ppsweep.folder.runfolder import nodes_json
from pytest_ppsweep.session import options

if TYPE_CHECKING:
    from pytest_ppsweep.matrix.model import Cluster
    from pytest_ppsweep.run.context import RunContext
    from pytest_ppsweep.session.claims import Claims
    from pytest_ppsweep.session.noboot import QuietRun
    from pytest_ppsweep.session.progress import Progress
    from pytest_ppsweep.session.runstate import RunState

__all__ = ["Preflight"]


class Preflight:
    """The session's checks before the first boot, and its cleanup after the last."""

    def __init__(self, config: pytest.Config, ctx: RunContext, state: RunState,
                 quiet: QuietRun, claims: Claims, progress: Progress) -> None:
        self.config = config
        self.ctx = ctx
        self.state = state
        self.quiet = quiet
        self.claims = claims
        self.progress = progress

    def run(self) -> bool:
        """Leftovers of earlier runs (ssh clusters: by label; local clusters: labelled ranks on
        this cluster's addresses and ports) are reported, or removed with --ppsweep-reap; then
        every node of every cluster is checked at once (free ports included). Any problem is a
        usage error listing all of them, and nothing is booted. Once; never in a run that boots
        nothing (:mod:`.quiet`), nor by an xdist controller before its workers' collection.
        True when it ran now."""
        if self.config.option.collectonly or not self.state.may_preflight:
            return False
        self.state.preflown()
        with self.quiet.refusal():  # a refused claim or node: no run folder is left
            self._preflight()
        return True

    def _preflight(self) -> None:
        from pytest_ppsweep.cluster import preflight, reap

        self.claims.claim()  # one sweep per cluster: before anything looks at the nodes
        for cluster in self.ctx.clusters.all:
            # labelled ranks on the nodes (a node that cannot be asked is left to the
            # preflight, which reports it); on local processes' shared machine only the ranks
            # of other runs that collide with this cluster's addresses and ports
            leftovers = reap.earlier(cluster, self.ctx.store.run_id, self.ctx.registry)
            if backend_of(cluster).reaps_by_label:
                leftovers = self._stop_own_leftovers(cluster, leftovers)
            if leftovers:
                if self.config.getoption("ppsweep_reap"):
                    failed = reap.remove(cluster, leftovers, registry=self.ctx.registry)
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
                    self.progress.warn(
                        f"cluster {cluster.name}: {len(leftovers)} rank(s) of earlier "
                        f"runs are still on the nodes (remove them with --ppsweep-reap):\n"
                        + reap.describe(leftovers)
                    )
            problems = self._check_nodes(cluster)
            if problems:
                raise pytest.UsageError(preflight.message(cluster, problems))
            # read once per image (the node check above asked it): never silently unchecked
            read = preflight.read_server_flags(self.ctx.sweep, cluster, self.ctx.registry)
            if read.flags is None:
                self.progress(f"WARNING: cluster {cluster.name}: server flags not checked "
                              f"before launch: {read.unchecked or read.problem}")
            self._keep_nodes(cluster)
        # after the claim's own watcher (session/claims.py): the claim moves first
        self.ctx.clusters.watch(self.renewed)

    def _check_nodes(self, cluster: Cluster) -> list[str]:
        """What each rank gets on the cluster's nodes (said), and every node's problems."""
        from pytest_ppsweep.cluster import preflight

        lines, problems = preflight.resources(self.ctx.sweep, cluster, self.ctx.registry)
        if lines:
            self.progress(f"cluster {cluster.name}: what each rank gets:\n"
                          + "\n".join(f"  {line}" for line in lines))
        return problems + preflight.check(self.ctx.sweep, cluster, self.ctx.registry)

    def _keep_nodes(self, cluster: Cluster) -> None:
        from pytest_ppsweep.cluster import nodeinfo

        self.ctx.store.write_json(nodes_json(cluster.name),
                                  nodeinfo.metadata(self.ctx.sweep, cluster, self.ctx.registry))

    def renewed(self, cluster: Cluster) -> None:
        """``cluster`` is on new nodes (a Slurm allocation renewed before a layout,
        ``Backend.before_layout``): they get the checks the first nodes got (what each rank
        gets, free ports, GPUs, the image or module, paths) before the layout boots there, and
        their facts replace the old nodes' in the run folder. A problem stops the sweep
        (ClusterStop: resumable), as a refused claim on them does."""
        from pytest_ppsweep.cluster import preflight

        problems = self._check_nodes(cluster)
        if problems:
            raise ClusterStop(preflight.message(
                cluster, problems, "the sweep stops before the next layout boots on them"))
        self._keep_nodes(cluster)
        self.progress(f"cluster {cluster.name}: the new nodes passed the preflight")

    def _stop_own_leftovers(self, cluster: Cluster, leftovers: list[Any]) -> list[Any]:
        """--ppsweep-resume on an ssh cluster: the ranks the interrupted run itself left (a
        SIGKILLed pytest tears nothing down) are stopped first, as ``continuity.plan.resume``
        does for local ranks; without this the resume's preflight refused the run's own
        containers as busy ports. Other runs' leftovers are returned: they stay the user's to
        reap. A fresh run id never matches a leftover, so only a resume stops anything."""
        from pytest_ppsweep.cluster import reap

        if not options.get(self.config, "ppsweep_resume"):
            return leftovers
        own = [x for x in leftovers if x.run == self.ctx.store.run_id]
        if not own:
            return leftovers
        failed = reap.remove(cluster, own, registry=self.ctx.registry)
        if failed:
            raise pytest.UsageError(
                f"--ppsweep-resume: cluster {cluster.name}: could not stop the ranks the "
                "interrupted run left:\n" + "\n".join(f"  - {f}" for f in failed)
            )
        self.progress(
            f"cluster {cluster.name}: stopped {len(own)} rank(s) left by the interrupted run "
            f"{self.ctx.store.run_id}:\n" + reap.describe(own)
        )
        return [x for x in leftovers if x.run != self.ctx.store.run_id]

    def reap_own(self) -> None:
        # Whatever this run still has on the nodes of an ssh cluster (a rank whose start was
        # interrupted, a worker that crashed) is removed by its run label.
        from pytest_ppsweep.cluster import reap

        for cluster in self.ctx.clusters.all:
            if not backend_of(cluster).reaps_by_label:
                continue
            errors: list[str] = []
            left = reap.find(
                cluster, run_id=self.ctx.store.run_id, errors=errors, registry=self.ctx.registry
            )
            failed = reap.remove(cluster, left, registry=self.ctx.registry) if left else []
            for problem in errors + failed:
                sys.stderr.write(f"ppsweep: cleanup of cluster {cluster.name}: {problem}\n")
