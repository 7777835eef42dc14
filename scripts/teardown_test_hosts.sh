#!/usr/bin/env bash
# Stop and remove what provision_test_hosts.sh created: containers, dockerds, sshds (and every
# process of each host: sshd is PID 1 of the host's PID namespace), namespaces, veths, the
# bridge, the sudo test user, its sudoers file and the /etc/hosts block. Processes are stopped by
# their recorded PIDs only.
#
#   sudo bash scripts/teardown_test_hosts.sh [--purge]
#
# --purge also deletes $PPSWEEP_TEST_HOSTS (keys, docker data); without it the next provisioning
# reuses the keys and the images already loaded into the dockerds.
set -uo pipefail

PURGE=0
for arg in "$@"; do
  case "$arg" in
    --purge) PURGE=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg (expected --purge)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "teardown_test_hosts.sh: needs root" >&2
  exit 77
fi
ROOT=${PPSWEEP_TEST_HOSTS:-/tmp/ppsweep-test-hosts}
NS_LIST=${NS_LIST:-"h601 h602 h603 h604"}
t0=$(date +%s.%N)
say() { printf 'teardown: %s\n' "$*"; }
# running: exists and is not a zombie (an init that does not reap orphans keeps zombies around)
running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

for ns in $NS_LIST; do
  dk=$ROOT/docker/$ns; sock=unix://$dk/docker.sock
  if [ -f "$dk/dockerd.bgpid" ] && running "$(cat "$dk/dockerd.bgpid")"; then
    ids=$(docker -H "$sock" ps -aq 2>/dev/null)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      docker -H "$sock" rm -f $ids >/dev/null 2>&1 && say "$ns: removed containers $(echo $ids | tr '\n' ' ')"
    fi
    kill "$(cat "$dk/dockerd.bgpid")" 2>/dev/null
    say "$ns: dockerd stopped"
  fi
done
for ns in $NS_LIST; do
  dk=$ROOT/docker/$ns
  for _ in $(seq 1 150); do [ -e "$dk/dockerd.pid" ] || break; sleep 0.1; done
  rm -f "$dk/dockerd.bgpid"
  # dockerd leaves its netns bind-mounted under the exec root: it would keep the namespace alive
  mountpoint -q "$dk/exec/netns/default" 2>/dev/null && umount "$dk/exec/netns/default"
  d=$ROOT/hosts/$ns
  if [ -f "$d/host.pid" ]; then
    # sshd is PID 1 of the host's PID namespace: when it ends, the kernel kills every process
    # of the host, and unshare (which blocks SIGTERM while it waits) returns
    u=$(cat "$d/host.pid")
    for p in $(ps -o pid= --ppid "$u" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 1 30); do running "$u" || break; sleep 0.1; done
    running "$u" && kill -KILL "$u" 2>/dev/null  # --kill-child: sshd gets SIGKILL with it
    say "$ns: sshd and the host's processes stopped"
    rm -f "$d/host.pid"
  fi
  # deleting the host side of the veth pair is synchronous (a namespace goes away lazily)
  ip link del "veth${ns#h}" 2>/dev/null && say "$ns: veth${ns#h} deleted"
  if ip netns list | grep -qw "^$ns"; then
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null; done
    ip netns del "$ns" && say "$ns: namespace deleted"
  fi
done
if ip link show br-infra >/dev/null 2>&1; then
  ip link del br-infra && say "bridge br-infra deleted"
fi
for _ in $(seq 1 50); do ip -br link | grep -qE '^veth6[0-9]+' || break; sleep 0.1; done

if [ -f /etc/sudoers.d/ppsweep-test ]; then rm -f /etc/sudoers.d/ppsweep-test; say "sudoers entry removed"; fi
if id ppsweep-test >/dev/null 2>&1; then userdel ppsweep-test 2>/dev/null && say "user ppsweep-test removed"; fi
if grep -q '# ppsweep-test-hosts' /etc/hosts 2>/dev/null; then
  sed '/# ppsweep-test-hosts begin/,/# ppsweep-test-hosts end/d' /etc/hosts > /etc/hosts.ppsweep.tmp \
    && cat /etc/hosts.ppsweep.tmp > /etc/hosts && rm -f /etc/hosts.ppsweep.tmp
  say "/etc/hosts entries removed"
fi
left=$(grep -c " $ROOT/" /proc/mounts || true)
if [ "$left" != 0 ]; then
  # overlay mounts of containers whose dockerd died: unmount deepest first
  grep " $ROOT/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  say "$left leftover mounts under $ROOT unmounted"
fi
if [ "$PURGE" = 1 ] && [ -d "$ROOT" ]; then rm -rf "$ROOT"; say "$ROOT deleted"; fi
say "done in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
