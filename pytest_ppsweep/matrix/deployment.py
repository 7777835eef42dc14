"""A layout as it is deployed: one or more server groups on disjoint nodes, and the router the
benchmark aims at when there is one.

A server group is one engine's server of one shape (PP × TP × EP, DP replicas) on its own nodes,
with a role: ``serve`` answers requests alone, ``prefill`` and ``decode`` are the two halves of a
disaggregated layout, joined by a router. Today's layouts are one ``serve`` group on every node
of the cluster and no router (:meth:`Deployment.single`): their ids, run folders and answers are
those of the PP/TP/EP they were before.

A disaggregated (P/D) layout is written ``p{x}-{prefill shape}-d{y}-{decode shape}``
(:attr:`Deployment.layout_id`): ``x`` prefill and ``y`` decode servers, each role's shape in
the compact form of :attr:`ServerGroup.compact` (``p1-pp4tp4ep4-d2-tp8ep4``): the xPyD ratio
first, then what each server of the role runs, so ``-k d2`` and ``--ppsweep-config p1d2`` pick it.

This module is the one home of "the groups' GPUs fit on the nodes" (:meth:`Deployment.fit`,
which :meth:`~pytest_ppsweep.matrix.model.Cluster.fits` asks), of the URL the benchmark aims at
(:meth:`Deployment.url`), of a P/D layout's id and of each prefill server's bootstrap port
(:meth:`Deployment.bootstrap_port`). It knows no engine's flags: they are passed through as
given (the engine turns a role, its bootstrap port and the transfer backend into its flags).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ppsweep.engine.engines import DEFAULT_ENGINE

__all__ = [
    "DEFAULT_ENGINE",
    "PD_ROLES",
    "ROLES",
    "Deployment",
    "DoesNotFit",
    "Placement",
    "Router",
    "ServerGroup",
]

ROLES = ("serve", "prefill", "decode")
PD_ROLES = ("prefill", "decode")  # the roles of a disaggregated layout, in start order


@dataclass(frozen=True)
class ServerGroup:
    """One server of one shape on its own nodes.

    ``nodes``: the cluster's host indices it runs on, or how many nodes the cluster assigns it
    (disjoint from every other group's), or None: as many nodes as its GPUs fill. ``flags``: the
    group's own server arguments, on top of the sweep's. ``label`` names the group in what is
    recorded about it (log and snapshot file names); "" for a single ``serve`` group, whose files
    keep the names they always had."""

    role: str
    pp: int
    tp: int
    ep: int
    dp: int = 1
    engine: str = DEFAULT_ENGINE
    nodes: tuple[int, ...] | int | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"server group role {self.role!r}: expected one of {', '.join(ROLES)}")
        for name in ("pp", "tp", "ep", "dp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.name}: {name} must be ≥ 1, found {getattr(self, name)}")

    @property
    def gpus(self) -> int:
        """GPUs the group needs: PP × TP per replica, times DP."""
        return self.pp * self.tp * self.dp

    @property
    def shape(self) -> str:
        """``pp{pp}-tp{tp}-ep{ep}`` (``-dp{dp}`` with several replicas)."""
        return f"pp{self.pp}-tp{self.tp}-ep{self.ep}" + (f"-dp{self.dp}" if self.dp > 1 else "")

    @property
    def compact(self) -> str:
        """The shape as a P/D layout id writes it: ``tp{tp}``, with ``pp{pp}`` before it when
        PP > 1 and ``ep{ep}``, ``dp{dp}`` after it when > 1 (``pp4tp4ep4``, ``tp8``,
        ``tp4dp2``): the sizes that are 1 are left out so the id stays readable."""
        return ((f"pp{self.pp}" if self.pp > 1 else "") + f"tp{self.tp}"
                + (f"ep{self.ep}" if self.ep > 1 else "") + (f"dp{self.dp}" if self.dp > 1 else ""))

    @property
    def name(self) -> str:
        """How messages name the group: ``serve group pp4-tp8-ep4``."""
        return f"{self.label or self.role} group {self.shape}"


@dataclass(frozen=True)
class Router:
    """The front of a disaggregated layout: where the benchmark's requests go. ``node`` is the
    cluster's host index it runs on, ``port`` its port there, ``policy`` how it spreads requests
    over the servers of each role (one of the engine's ``router_policies``; "" the engine's
    default), ``flags`` further router arguments, passed through."""

    port: int
    node: int = 0
    engine: str = DEFAULT_ENGINE
    flags: Mapping[str, Any] = field(default_factory=dict)
    policy: str = ""


Placement = tuple[tuple[int, ...], ...]  # per group, in order: the cluster's host indices


class DoesNotFit(ValueError):
    """The groups' GPUs do not fit on a cluster's nodes; the message names each problem."""


@dataclass(frozen=True)
class Deployment:
    """A layout's server groups, in start order, and its router (None: the single ``serve``
    group answers the benchmark). ``transfer_backend``: how a P/D layout's decode servers get
    the KV its prefill servers computed (one of the engine's ``transfer_backends``; "" for a
    layout with no P/D roles)."""

    groups: tuple[ServerGroup, ...]
    router: Router | None = None
    transfer_backend: str = ""

    def __post_init__(self) -> None:
        if not self.groups:
            raise ValueError("a deployment needs at least one server group")
        serve = [g for g in self.groups if g.role == "serve"]
        if self.router is None and (len(serve) != 1 or len(self.groups) != 1):
            roles = ", ".join(g.role for g in self.groups)
            raise ValueError(f"a deployment without a router is one serve group; found: {roles}")
        labels = [g.label for g in self.groups]
        if len(self.groups) > 1 and (not all(labels) or len(set(labels)) != len(labels)):
            raise ValueError(f"the groups of a deployment need distinct labels, found {labels}")

    @classmethod
    def single(cls, pp: int, tp: int, ep: int, flags: Mapping[str, Any] | None = None,
               engine: str = DEFAULT_ENGINE) -> Deployment:
        """Today's layout: one ``serve`` group on every node of the cluster, no router."""
        return cls((ServerGroup("serve", pp, tp, ep, engine=engine, flags=dict(flags or {})),))

    @property
    def gpus(self) -> int:
        """GPUs of every group together."""
        return sum(g.gpus for g in self.groups)

    @property
    def serve_group(self) -> ServerGroup:
        """The one ``serve`` group (what a single-group feature reads: the topology check, the
        profile window's ranks, the TP domains, the planner); ValueError for a layout of
        several groups, which such a feature does not handle yet."""
        if len(self.groups) != 1 or self.groups[0].role != "serve":
            names = ", ".join(g.name for g in self.groups)
            raise ValueError(f"a deployment of {len(self.groups)} groups ({names}) has no single "
                             "serve group")
        return self.groups[0]

    @property
    def disaggregated(self) -> bool:
        """Whether the layout has prefill and decode servers (a P/D layout)."""
        return any(g.role in PD_ROLES for g in self.groups)

    def role_groups(self, role: str) -> tuple[ServerGroup, ...]:
        """The groups of ``role``, in start order."""
        return tuple(g for g in self.groups if g.role == role)

    @property
    def layout_id(self) -> str:
        """A P/D layout's id: ``p{x}-{shape}-d{y}-{shape}`` (``p1-pp4tp4ep4-d2-tp8ep4``), the
        number of servers of each role and the compact shape (:attr:`ServerGroup.compact`) of
        its first server (a parsed P/D layout's servers of one role share one shape). Only a
        P/D layout has one: a single serve group's id is its config's ``pp{pp}-tp{tp}-ep{ep}``."""
        if not self.disaggregated:
            raise ValueError("only a P/D layout has a deployment id; a serve group's is its "
                             "config's pp-tp-ep")
        parts = []
        for role in PD_ROLES:
            groups = self.role_groups(role)
            parts += [f"{role[0]}{len(groups)}", groups[0].compact if groups else "none"]
        return "-".join(parts)

    @property
    def ratio(self) -> str:
        """``p{x}d{y}``: the xPyD ratio of a P/D layout (a selector of its every shape)."""
        return "".join(f"{role[0]}{len(self.role_groups(role))}" for role in PD_ROLES)

    def bootstrap_port(self, group: ServerGroup, base: int) -> int:
        """The port of ``group``'s KV bootstrap server: ``base`` (the cluster's
        ``bootstrap_port``) plus the group's index among the prefill groups. The prefill servers
        run on disjoint nodes, so one port would do on real nodes; each its own port also lets
        them share one machine (a local cluster's loopback "nodes") and makes the router's
        command name which server each port is. ValueError for a group that is no prefill
        group of this layout (only a prefill server runs a bootstrap server)."""
        prefill = self.role_groups("prefill")
        if group not in prefill:
            raise ValueError(f"{group.name}: only a prefill group of the layout has a bootstrap "
                             "port")
        return base + prefill.index(group)

    @property
    def lead(self) -> ServerGroup:
        """The group whose shape the recorded pp/tp/ep columns (and a config's pp/tp/ep) carry:
        the serve group, or the first group of a disaggregated layout (its first prefill
        server)."""
        return self.groups[0]

    def columns(self) -> dict[str, int]:
        """``{"pp": …, "tp": …, "ep": …}`` of :attr:`lead`: the layout columns of the run folder's
        rows (results.csv, configs.csv, slo_probes.csv, comm.csv, manifests)."""
        g = self.lead
        return {"pp": g.pp, "tp": g.tp, "ep": g.ep}

    def fit(self, nodes: int, gpus_per_node: int) -> tuple[Placement, list[str]]:
        """Each group's nodes on a cluster of ``nodes`` × ``gpus_per_node`` GPUs, and what does
        not fit (empty: it fits). Every group fills its nodes exactly, no node is in two groups,
        and the groups together take every node of the cluster (a layout is never placed on
        part of a larger cluster: another cluster of the pool has its size). Explicit nodes are
        taken first, then counted groups get the lowest free nodes, in group order."""
        problems: list[str] = []
        taken: dict[int, str] = {}
        placed: list[tuple[int, ...] | None] = [None] * len(self.groups)
        for i, g in enumerate(self.groups):
            if not isinstance(g.nodes, tuple):
                continue
            bad = [n for n in g.nodes if not 0 <= n < nodes]
            if bad:
                problems.append(f"{g.name}: nodes {bad} are not among the cluster's {nodes} nodes")
                continue
            twice = [n for n in g.nodes if n in taken]
            if twice or len(set(g.nodes)) != len(g.nodes):
                owners = sorted({taken[n] for n in twice}) or [g.name]
                problems.append(f"{g.name}: nodes {twice or list(g.nodes)} are also "
                                f"{', '.join(owners)}'s; groups need disjoint nodes")
                continue
            taken.update((n, g.name) for n in g.nodes)
            placed[i] = g.nodes
        for i, g in enumerate(self.groups):
            if placed[i] is not None or isinstance(g.nodes, tuple):
                continue
            want = g.nodes if isinstance(g.nodes, int) else -(-g.gpus // max(gpus_per_node, 1))
            free = [n for n in range(nodes) if n not in taken]
            if want > len(free):
                problems.append(f"{g.name}: needs {want} nodes, {len(free)} of the cluster's "
                                f"{nodes} left")
                continue
            placed[i] = tuple(free[:want])
            taken.update((n, g.name) for n in free[:want])
        for i, g in enumerate(self.groups):
            got = placed[i]
            if got is not None and g.gpus != len(got) * gpus_per_node:
                problems.append(f"{g.name}: needs {g.gpus} GPUs, its {len(got)} nodes have "
                                f"{len(got) * gpus_per_node} ({gpus_per_node} per node)")
        if not problems and len(taken) != nodes:
            problems.append(f"the groups take {len(taken)} of the cluster's {nodes} nodes "
                            f"({self.gpus} of {nodes * gpus_per_node} GPUs)")
        if self.router is not None and not 0 <= self.router.node < nodes:
            problems.append(f"router: node {self.router.node} is not among the cluster's "
                            f"{nodes} nodes")
        return tuple(p or () for p in placed), problems

    def placement(self, nodes: int, gpus_per_node: int) -> Placement:
        """:meth:`fit`'s placement; :class:`DoesNotFit` naming every problem when it does not."""
        placed, problems = self.fit(nodes, gpus_per_node)
        if problems:
            raise DoesNotFit("; ".join(problems))
        return placed

    def url(self, addresses: Sequence[str], port: int, placement: Placement) -> str:
        """The URL the benchmark aims at, given the cluster's host ``addresses`` and its server
        ``port``: the router's when there is one, else the serve group's head node's."""
        if self.router is not None:
            return f"http://{addresses[self.router.node]}:{self.router.port}"
        return f"http://{addresses[placement[0][0]]}:{port}"
