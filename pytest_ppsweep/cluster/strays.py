"""Processes that left a rank's process group: found by the rank's labels and stopped.

Stopping a rank stops its process group. A child that starts its own session (``setsid``, as
daemons and some launchers do) is no longer in that group and would outlive the teardown,
holding memory (on a GPU node, GPU memory). Every process of a rank still carries the rank's
labels in its environment (``PPSWEEP_RUN``, ``PPSWEEP_CONFIG``, ``PPSWEEP_NODE_RANK``,
:mod:`pytest_ppsweep.cluster.labels`), which a new session does not change. So after the group
is stopped, the node is swept for processes carrying exactly this rank's labels, and those are
stopped too (SIGTERM, SIGKILL after the grace).

One script for every backend that runs processes: it runs through the node's command host
(``LocalHost`` for loopback nodes, ``SshHost`` over SSH), so the local and the SSH launchers (and
any other process launcher) share the rule:

    pids = sweep(host, labels)                      # [] when nothing had escaped
    if pids: report(stray_message(node_rank, pids))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_ppsweep.cluster.base import CommandHost, HostError
from pytest_ppsweep.cluster.labels import (
    CLUSTER_ENV,
    CONFIG_ENV,
    CONFIG_LABEL,
    NODE_RANK_ENV,
    NODE_RANK_LABEL,
    RUN_ENV,
    RUN_LABEL,
)

__all__ = ["stray_message", "sweep"]

# $1..$3: run id, configuration id, node rank; $4: grace in tenths of a second. Prints the pids
# it found (one line), then stops them. The sweeping shell runs without the label variables
# (``env -u``), so neither it nor its grep/tr match.
_SWEEP = rf"""
run=$1; cfg=$2; rank=$3; ticks=$4; pids=
for f in $(grep -l -s -a -F "{RUN_ENV}=$run" /proc/[0-9]*/environ 2>/dev/null); do
  p=${{f#/proc/}}; p=${{p%/environ}}
  [ "$p" = "$$" ] && continue
  e=$(tr '\000' '\n' < "$f" 2>/dev/null) || continue
  printf '%s\n' "$e" | grep -q -x -F "{RUN_ENV}=$run" || continue
  printf '%s\n' "$e" | grep -q -x -F "{CONFIG_ENV}=$cfg" || continue
  printf '%s\n' "$e" | grep -q -x -F "{NODE_RANK_ENV}=$rank" || continue
  pids="$pids $p"
done
[ -n "$pids" ] || exit 0
echo $pids
kill -TERM $pids 2>/dev/null
i=0
while kill -0 $pids 2>/dev/null; do i=$((i+1)); [ $i -gt $ticks ] && break; sleep 0.1; done
kill -KILL $pids 2>/dev/null
i=0
while kill -0 $pids 2>/dev/null; do i=$((i+1)); [ $i -gt 50 ] && exit 3; sleep 0.1; done
exit 0
"""


def sweep(host: CommandHost, labels: Mapping[str, str], grace_s: float = 2.0) -> list[int]:
    """Stop every process on ``host`` carrying this rank's labels (run, configuration, node
    rank); returns their pids. Call it after the rank's process group is stopped: whatever is
    left then had left the group. Raises :class:`HostError` when the node cannot be asked or a
    process survived SIGKILL (the message names the host and the pids)."""
    run, config, rank = (labels.get(k, "") for k in (RUN_LABEL, CONFIG_LABEL, NODE_RANK_LABEL))
    if not run:
        return []  # an unlabelled rank (no run id): nothing to look for
    unset = [a for env in (RUN_ENV, CLUSTER_ENV, CONFIG_ENV, NODE_RANK_ENV) for a in ("-u", env)]
    argv = ["env", *unset, "sh", "-c", _SWEEP, "ppsweep-sweep", run, config, rank,
            str(max(1, int(grace_s * 10)))]
    res = host.run(argv, grace_s + 30)
    pids = [int(p) for p in res.stdout.split() if p.isdigit()]
    if not res.ok:
        raise HostError(f"host {host.name}: processes that had left node{rank}'s process group "
                        f"(pid {', '.join(map(str, pids)) or '?'}) were not stopped "
                        f"(exit {res.exit_status}): {res.stderr.strip()[:300]}")
    return pids


def stray_message(node_rank: int | str, pids: Sequence[int]) -> str:
    """``1 process had left rank 2's process group: pid 4242 (stopped)``."""
    n = len(pids)
    what = "1 process" if n == 1 else f"{n} processes"
    return (f"{what} had left rank {node_rank}'s process group: "
            f"pid {', '.join(map(str, pids))} (stopped)")
