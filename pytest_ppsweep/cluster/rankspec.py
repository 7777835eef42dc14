"""The rank command: the argv and environment of every node's rank for one layout (the engine
writes the argv: engine/), the same for every launcher; and the command of a P/D layout's
router (:func:`router_spec`).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ppsweep.engine.engines import DEFAULT_ENGINE, engine_of
from pytest_ppsweep.matrix.deployment import ServerGroup
from pytest_ppsweep.matrix.model import Cluster, Config, Sweep
from pytest_ppsweep.redact import redact, redact_argv, redact_env


def server_flags(server: Mapping[str, Any], engine: str = DEFAULT_ENGINE) -> list[str]:
    """``{"disable_radix_cache": True, "chunked_prefill_size": 8192}`` → CLI flags (the
    engine's way)."""
    return engine_of(engine).server_flags(server)


@dataclass(frozen=True)
class RankSpec:
    """How one node's rank is started: its host, argv and environment."""

    node_rank: int
    host: str
    address: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    group: str = ""  # the server group's label ("": a single serve group)

    def command_line(self) -> str:
        """The equivalent shell command, secrets redacted (evidence for service/)."""
        env = " ".join(
            f"{k}={shlex.quote(v)}" for k, v in sorted(redact_env(self.env).items())
        )
        line = f"env {env} {shlex.join(redact_argv(self.argv))}".strip()
        return redact(line)  # type: ignore[no-any-return]


def cpu_bind(local_ranks: int, cores: int | None = None) -> str:
    """The ``{cpu_bind}`` of a rank's environment (what SGLang's CPU backend takes as its
    OMP thread binding) for this node: one core set per local rank,
    separated by ``|``; with fewer cores than ranks, cores are shared round-robin."""
    n = cores or len(os.sched_getaffinity(0))
    if local_ranks <= n:
        per = n // local_ranks
        return "|".join(f"{i * per}-{i * per + per - 1}" if per > 1 else str(i * per)
                        for i in range(local_ranks))
    return "|".join(str(i % n) for i in range(local_ranks))


def _expand(value: str, fields: Mapping[str, str], key: str) -> str:
    """Fill ``{host}``, ``{node_rank}``, ``{cpu_bind}`` and ``{image}`` (the sweep's image, as
    ``--ppsweep-image`` sets it) in an environment value."""
    try:
        return value.format_map(fields)
    except (KeyError, ValueError, IndexError) as exc:
        raise ValueError(
            f"environment {key}={value!r}: unknown placeholder {exc}; expected "
            f"{', '.join('{' + f + '}' for f in fields)}"
        ) from None


def local_path(cluster: Cluster, path: str) -> str:
    """``~`` and ``$VARS`` expanded for ranks on this machine; a remote node expands its own."""
    if cluster.kind != "local" or not path:
        return path
    return os.path.expandvars(os.path.expanduser(path))


def rank_specs(sweep: Sweep, cluster: Cluster, config: Config) -> list[RankSpec]:
    """The argv and environment of every node's rank for ``config`` on ``cluster``: each
    server group's ranks (:func:`group_specs`), in the deployment's group order."""
    deployment = config.deployment
    placement = cluster.placement(config)
    return [spec for group, nodes in zip(deployment.groups, placement, strict=True)
            for spec in group_specs(sweep, cluster, config, group, nodes)]


def bootstrap_port(cluster: Cluster, config: Config, group: ServerGroup) -> int:
    """The KV bootstrap port of a prefill ``group`` of ``config`` on ``cluster``
    (Deployment.bootstrap_port from the cluster's ``bootstrap_port``); 0 for any other group,
    which runs no bootstrap server."""
    if group.role != "prefill":
        return 0
    return config.deployment.bootstrap_port(group, cluster.bootstrap_port)


def group_specs(sweep: Sweep, cluster: Cluster, config: Config, group: ServerGroup,
                nodes: Sequence[int]) -> list[RankSpec]:
    """The ranks of one server ``group`` of ``config`` on ``cluster``'s hosts ``nodes``: node
    ranks count from 0 within the group, its head node hosts its rendezvous. Its server
    arguments: the sweep's, the layout's and the group's own (Sweep.group_args), then what
    the engine derives from its role (a P/D server's mode, bootstrap port, transfer
    backend)."""
    python = local_path(cluster, cluster.python) or sys.executable
    model_path = local_path(cluster, sweep.model_path)
    hosts = [cluster.hosts[i] for i in nodes]
    head = hosts[0]
    engine = engine_of(group.engine)
    server = {**sweep.group_args(config, group),
              **engine.role_flags(group.role, bootstrap_port=bootstrap_port(cluster, config, group),
                                  transfer_backend=config.deployment.transfer_backend)}
    merged = {**sweep.env, **cluster.env, **config.env}
    local_ranks = group.gpus // len(hosts)
    specs = []
    for rank, host in enumerate(hosts):
        fields = {"host": host.address, "node_rank": str(rank), "cpu_bind": cpu_bind(local_ranks),
                  "image": sweep.image}
        env = {k: _expand(v, fields, k) for k, v in merged.items()}
        argv = engine.rank_argv(
            python=python, module=cluster.server_module, model_path=model_path, pp=group.pp,
            tp=group.tp, ep=group.ep, nnodes=len(hosts), node_rank=rank,
            dist_init=f"{head.address}:{cluster.dist_init_port}", host=host.address,
            port=cluster.port, server=server, dp=group.dp)
        specs.append(RankSpec(rank, host.name, host.address, tuple(argv), env, group.label))
    return specs


ROUTER_LABEL = "router"  # a router's RankSpec.group


def router_spec(sweep: Sweep, cluster: Cluster, config: Config) -> RankSpec | None:
    """The command of ``config``'s router on ``cluster`` (None: a layout without one): on its
    node (``[router] node``), bound to that node's address and ``[router] port``, aimed at each
    prefill server's head node (the cluster's ``port``) with its bootstrap port and at each
    decode server's head node, in start order. Its environment is the sweep's and the
    cluster's (a rank's placeholders filled for its node)."""
    deployment = config.deployment
    router = deployment.router
    if router is None:
        return None
    placement = cluster.placement(config)
    heads = {g.label: cluster.hosts[nodes[0]] for g, nodes in
             zip(deployment.groups, placement, strict=True)}
    host = cluster.hosts[router.node]
    engine = engine_of(router.engine)
    argv = engine.router_argv(
        python=local_path(cluster, cluster.python) or sys.executable, host=host.address,
        port=router.port,
        prefill=[(f"http://{heads[g.label].address}:{cluster.port}",
                  bootstrap_port(cluster, config, g)) for g in deployment.role_groups("prefill")],
        decode=[f"http://{heads[g.label].address}:{cluster.port}"
                for g in deployment.role_groups("decode")],
        policy=router.policy, flags=router.flags)
    fields = {"host": host.address, "node_rank": "0", "cpu_bind": cpu_bind(1),
              "image": sweep.image}
    env = {k: _expand(v, fields, k) for k, v in {**sweep.env, **cluster.env}.items()}
    return RankSpec(0, host.name, host.address, tuple(argv), env, ROUTER_LABEL)


def with_env(env: Mapping[str, str], argv: Sequence[str]) -> list[str]:
    """``env K=V … argv``: what the launchers put around a rank (ssh_launcher's script too)."""
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv] if env else list(argv)


def describe(specs: Sequence[RankSpec]) -> str:
    return ", ".join(f"node{s.node_rank}={s.address}" for s in specs)
