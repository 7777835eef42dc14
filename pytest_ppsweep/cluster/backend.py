"""What one cluster kind is: the :class:`Backend` every kind module subclasses.

A backend answers every question the rest of the package used to answer by testing
``cluster.kind`` or ``cluster.launcher``: how to run a command on a node (``host``), how to start
a rank (``launcher``), where the nodes come from (an allocation or the sweep file), how leftovers
of earlier runs are found, where the profiler's traces are written and how they come back,
whether one nvidia-smi call answers for every node, what the preflight checks on a node, and
where the engine runs a short command as rank 0 would (the server-flag check: its interpreter,
environment, image and mounts on node 0), and whether the dry run may run it there.
The code that does the checking lives in the modules that use the answers (cluster/preflight.py,
reap.py, nodeinfo.py import this one, never the other way).

One module per kind subclasses it (``kind_local``, ``kind_ssh``, ``kind_slurm``,
``kind_local_docker``), each class naming the ``(kind, launcher)`` of the table of kinds
(matrix/kinds.py) it is the code of, and :mod:`~pytest_ppsweep.cluster.backends` derives the
registry from that table: the one place that maps a cluster to its code. Outside
``cluster/`` nothing branches on a kind: it asks ``backend_of(cluster).<capability>``
(tests/test_layering_kind_branches.py keeps it so).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pytest_ppsweep.cluster.base import CommandHost, CommandResult, HostError, Launcher
from pytest_ppsweep.cluster.ports import listeners
from pytest_ppsweep.cluster.rankspec import with_env
from pytest_ppsweep.cluster.registry import Registry
from pytest_ppsweep.matrix.kinds import CLUSTER_KINDS, NEEDS_IMAGE
from pytest_ppsweep.matrix.model import Cluster, Host, Sweep

HOSTS_PLACEHOLDER = "{hosts}"

# one preflight check of a node (cluster/preflight.py: CHECKS): the server module imports in every
# rank environment, the image is there, the server's parser takes the sweep's flags (node 0,
# where the engine runs: run_engine), Pyxis works, the image is imported on the node (Pyxis: a
# squashfs, once), the model path and devices exist, the GPUs are idle, the ports are free
# (asked of the node, or read from this machine's /proc)
NodeCheck = Literal["module", "image", "flags", "pyxis", "pyxis_image", "paths", "gpus", "ports",
                    "local_ports"]


class Backend:
    """One cluster kind's code, bound to one cluster (``backend_of(cluster)``). What the table
    of kinds (matrix/kinds.py) says of its (kind, launcher) is not repeated here but read from
    it: ``nodes_from_allocation`` and ``in_containers``."""
    # the row of the table of kinds this is the code of (cluster/backends.py registers it there)
    kind: ClassVar[str]
    launcher_name: ClassVar[str]
    # every node is this machine (loopback "nodes"): one look answers for all of them
    on_this_machine: ClassVar[bool] = False
    # the ranks see this machine's files at the same paths (local processes): the traces are
    # written straight into the run folder, the comm worker runs from the package
    shares_files: ClassVar[bool] = False
    # leftovers are every labelled rank on the nodes; False: only the labelled ranks of other
    # runs that would collide with this cluster's ports (a machine others share, whose ranks
    # die with this process: local processes)
    reaps_by_label: ClassVar[bool] = True
    # where the server's own parser runs for the flag check (run_engine), in words
    flags_where: ClassVar[str] = "on node 0, with the ranks' interpreter and environment"
    # whether the engine runs on this machine, so that the dry run may run its parser without
    # opening a connection (else it checks the flags offline: cluster/preflight.dry_run_flags)
    engine_here: ClassVar[bool] = False

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @classmethod
    def for_cluster(cls, cluster: Cluster) -> Backend:
        """The backend of ``cluster`` (a kind with variants picks one: Slurm with or without
        Pyxis); what cluster/backends.backend_of calls."""
        return cls(cluster)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cluster.name!r})"

    @property
    def nodes_from_allocation(self) -> bool:
        """The nodes come from an allocation taken at the start of the run (slurm): not known
        from the sweep file alone, and recorded in run.json for the workers."""
        return CLUSTER_KINDS[self.kind].allocated

    @property
    def in_containers(self) -> bool:
        """Each rank is a container of the sweep's image."""
        return NEEDS_IMAGE[self.launcher_name]

    # -- running things ----------------------------------------------------------------------

    def host(self, host: Host, registry: Registry | None = None) -> CommandHost:
        """The command runner of one node."""
        raise NotImplementedError

    def launcher(self, sweep: Sweep | None = None, registry: Registry | None = None) -> Launcher:
        """The rank launcher (built without a sweep it only validates the cluster)."""
        raise NotImplementedError

    def docker_client(self, host: Host, registry: Registry) -> Any:
        """The registry's docker client of one node (container kinds only)."""
        raise HostError(f"cluster {self.cluster.name!r}: {self.kind} + {self.launcher_name} "
                        "has no docker daemon")

    def prepare(self, run_id: str, registry: Registry, jobid: str = "",
                reap: bool = False) -> Cluster:
        """The cluster with its nodes known (an allocation's: ``nodes_from_allocation``)."""
        return self.cluster

    def allocation(self) -> str:
        """The allocation the cluster's nodes come from, as the file or :meth:`prepare` named
        it ("": none, or not taken yet)."""
        return ""

    def with_allocation(self, jobid: str) -> Cluster:
        """The cluster taking allocation ``jobid`` (an xdist worker takes its controller's);
        only a kind whose nodes come from an allocation has one."""
        raise HostError(f"cluster {self.cluster.name!r}: {self.kind} + {self.launcher_name} "
                        "has no allocation")

    def before_layout(self, eta_s: float | None, run_id: str, registry: Registry,
                      say: Callable[[str], None]) -> Cluster:
        """The cluster to start the next layout on, which takes ``eta_s`` seconds (None: not
        known yet): this one, or one with new nodes (an allocation's kind: a new allocation
        when the one held ends too soon or lost a node). Raises ClusterStop when the sweep
        cannot go on here; ``say`` reports what was done."""
        return self.cluster

    def resources(self, sweep: Sweep, registry: Registry, smi: Callable[[str], list[str]]
                  ) -> tuple[list[str], list[str]]:
        """What each rank gets on each node (report lines) and the problems, ``"<node>
        (<address>): <problem>"``, where a rank gets less than the sweep asks: the preflight's
        (an allocation's kind asks its scheduler); ([], []) where nothing is allotted.
        ``smi``: a node's nvidia-smi command line, by its address (cluster/nodeinfo.py)."""
        return [], []

    def nodes_to_ask(self) -> tuple[Host, ...]:
        """The nodes to ask what runs there or what they are: one when they are one machine."""
        return self.cluster.hosts[:1] if self.on_this_machine else self.cluster.hosts

    # -- profile traces ----------------------------------------------------------------------

    def trace_dir(self, root: str, run_id: str, config_id: str, local: Path) -> str:
        """Where the ranks write their profiler traces (``local``: the run folder's)."""
        if self.shares_files:
            return str(local)
        return f"{root.rstrip('/')}/{run_id}/{config_id}"

    def list_files(self, host: CommandHost, folder: str) -> dict[str, int]:
        """File name → size in ``folder`` of a node (empty when the folder is not there yet)."""
        if self.shares_files:
            return local_listing(Path(folder))
        return remote_listing(host, folder)

    def fetch_files(self, host: CommandHost, folder: str, names: Sequence[str],
                    local: Path) -> None:
        """The named files of ``folder`` on a node copied into ``local``; a HostError (or
        OSError) says what could not be fetched."""
        if self.shares_files:
            return
        for name in names:
            sftp_get(host, f"{folder}/{name}", local / name)

    # -- GPUs ---------------------------------------------------------------------------------

    def one_smi_call(self) -> bool:
        """Whether one nvidia-smi call answers for every node: nodes that are this machine, of
        several nodes, whose ``nvidia_smi`` takes ``{hosts}``."""
        c = self.cluster
        return (self.on_this_machine and len(c.hosts) > 1
                and any(HOSTS_PLACEHOLDER in a for a in c.nvidia_smi))

    def port_holder(self, address: str, port: int) -> str:
        """Who listens on ``address:port`` where that can be read without a connection
        (this machine's /proc); "" elsewhere."""
        if not self.on_this_machine:
            return ""

        found = listeners(port, address)
        return found[0].describe() if found else ""

    # -- preflight and the dry run -------------------------------------------------------------

    def node_checks(self, rank0: bool) -> tuple[NodeCheck, ...]:
        """What the preflight checks on one node, in order (cluster/preflight.py runs them:
        ``preflight.CHECKS``)."""
        raise NotImplementedError

    def dry_run_lines(self, sweep: Sweep) -> list[str]:
        """What the dry run says about this kind beyond the rank commands."""
        if self.in_containers:
            from pytest_ppsweep.cluster.docker_launcher import container_options

            return [f"each command runs in a container of image {sweep.image} on its node, "
                    "with the container options: " + shlex.join(container_options(
                        self.cluster, sweep.model_path, sweep.devices))]
        return []

    def dry_run_point_lines(self, config_id: str, nodes: Sequence[str]) -> list[str]:
        """What the dry run says this kind runs to start one point's ranks on ``nodes`` (node
        names, in node-rank order) beyond each node's command: nothing for kinds that start
        each rank's command itself."""
        return []

    # -- where the engine runs (the server-flag check) ------------------------------------------

    def engine_id(self, sweep: Sweep) -> Hashable:
        """What the engine's parser depends on besides the interpreter and module: node 0
        (processes on its file system), or the image (containers): the flag check runs once
        per engine id in a run."""
        return (self.kind, self.cluster.rank0().address)

    def engine_where(self, sweep: Sweep) -> str:
        """Where :meth:`run_engine` runs, in words."""
        host = self.cluster.rank0()
        return f"on node 0 {host.name} ({host.address})"

    def run_engine(self, sweep: Sweep, argv: Sequence[str], env: Mapping[str, str],
                   registry: Registry, timeout: float, node: Host | None = None
                   ) -> CommandResult:
        """``argv`` where a rank's engine runs (``node``, node 0 by default), as the rank would
        get it: on its node, with ``env`` (containers: in the image, with the ranks' mounts). A
        HostError when it cannot be run there at all."""
        return self.host(node or self.cluster.rank0(), registry).run(with_env(env, argv), timeout)


def remote_listing(host: CommandHost, folder: str) -> dict[str, int]:
    """File name → size in ``folder`` on the node, through its command runner."""
    script = f"find {shlex.quote(folder)} -maxdepth 1 -type f -printf '%s %f\\n' 2>/dev/null"
    res = host.run(["sh", "-c", script + " || true"], timeout=30)
    out: dict[str, int] = {}
    for line in res.stdout.splitlines():
        size, _, name = line.strip().partition(" ")
        if name and size.isdigit():
            out[name] = int(size)
    return out


def local_listing(folder: Path) -> dict[str, int]:
    """File name → size in ``folder`` of this machine."""
    out: dict[str, int] = {}
    if not folder.is_dir():
        return out
    for p in folder.iterdir():
        try:
            if p.is_file():
                out[p.name] = p.stat().st_size
        except OSError:
            continue  # renamed or removed meanwhile
    return out


def sftp_get(host: CommandHost, remote: str, target: Path) -> None:
    """SFTP over the host's fabric connection (``SshHost.connection``)."""
    connection = getattr(host, "connection", None)
    if connection is None:
        raise HostError(f"cannot fetch {remote}: the host has no SSH connection")
    try:
        connection().get(remote, str(target))
    except (OSError, HostError) as exc:
        raise HostError(f"cannot fetch {remote} over SFTP: {exc}") from None
