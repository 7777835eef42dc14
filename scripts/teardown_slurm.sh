#!/usr/bin/env bash
# Stop and remove what provision_slurm.sh created: jobs, the login node's sshd, slurmds (and every process of each node:
# killing the node's init ends its PID namespace), slurmctld, munged, namespaces, veths, bridge.
# Processes are stopped by their recorded PIDs only.
#
#   sudo bash scripts/teardown_slurm.sh [--purge]     # --purge also deletes $PPSWEEP_SLURM_ROOT
set -uo pipefail
PURGE=0
[ "${1:-}" = --purge ] && PURGE=1
[ "$(id -u)" = 0 ] || { echo "teardown_slurm.sh: needs root" >&2; exit 77; }
ROOT=${PPSWEEP_SLURM_ROOT:-/tmp/ppsweep-slurm}
NODES=${SLURM_NODES:-"s701 s702 s703 s704"}
say() { printf 'teardown_slurm: %s\n' "$*"; }
running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop_pidfile() {  # stop_pidfile FILE SIGNAL: signal the recorded pid, wait up to 5 s, then KILL
  [ -f "$1" ] || return 0
  local p; p=$(cat "$1")
  running "$p" || { rm -f "$1"; return 0; }
  kill "-$2" "$p" 2>/dev/null
  for _ in $(seq 1 50); do running "$p" || break; sleep 0.1; done
  running "$p" && kill -KILL "$p" 2>/dev/null
  rm -f "$1"
}
if [ -f "$ROOT/slurm.conf" ]; then
  SLURM_CONF=$ROOT/slurm.conf scancel --full --quiet --user=root 2>/dev/null || true
fi
# the login node's sshd (unshare --kill-child: its sessions end with it)
stop_pidfile "$ROOT/login/host.pid" KILL && say "login node's sshd stopped"
for n in $NODES; do
  # unshare --kill-child: the node's init (and with it every process of the node) gets SIGKILL
  stop_pidfile "$ROOT/nodes/$n/node.pid" KILL && say "$n: slurmd and the node's processes stopped"
  ip netns del "$n" 2>/dev/null
  ip link del "vs${n#s}" 2>/dev/null
done
stop_pidfile "$ROOT/ctld/slurmctld.pid" TERM && say "slurmctld stopped"
stop_pidfile "$ROOT/munge/munged.pid" TERM && say "munged stopped"
ip link del br-slurm 2>/dev/null && say "bridge br-slurm removed"
[ "$PURGE" = 1 ] && rm -rf "$ROOT" && say "$ROOT removed"
exit 0
