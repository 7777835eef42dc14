#!/usr/bin/env bash
# Test hosts for the remote backends: 4 network-namespace "hosts" h601-h604 (10.200.0.101-104) on
# bridge br-infra (10.200.0.1/24), each with its own sshd (own UTS, PID and mount namespace, so
# `hostname`, process ids and /dev/shm are per host) and, with --docker, its own dockerd.
#
#   sudo bash scripts/provision_test_hosts.sh [--docker]     # idempotent; prints what it did
#   sudo bash scripts/teardown_test_hosts.sh [--purge]       # stops and removes all of it
#
# Everything lives under $PPSWEEP_TEST_HOSTS (default /tmp/ppsweep-test-hosts):
#   ssh/id_ed25519          client key (root and the sudo test user log in with it)
#   ssh/known_hosts         the hosts' keys, "10.200.0.101 ssh-ed25519 ..."
#   sudo/password           password of user ppsweep-test (sudo asks for it), mode 600
#   hosts/<h>/              sshd config, host key, sshd.log
#   docker/<h>/docker.sock  the host's dockerd (ssh sessions get DOCKER_HOST pointing at it)
#   test-hosts.env          KEY=VALUE summary read by tests/remote/conftest.py
#
# Why the namespaces look like this (all verified on Debian 12, kernel 6.x, no systemd):
# - sshd runs as PID 1 of its own PID namespace (scripts/lib/netns.sh, shared with
#   provision_slurm.sh's login node).
# - dockerd is started with `nsenter --net`, not `ip netns exec` (which remounts /sys and hides
#   /sys/fs/cgroup: "Devices cgroup isn't mounted").
# - a no-op nvidia-container-runtime-hook on dockerd's PATH makes GPU device requests succeed.
# - no default route in the namespaces: traffic stays on 10.200.0.0/24.
# It installs every package it uses, and when it fails after starting or creating anything it
# tears the hosts down (scripts/teardown_test_hosts.sh).
set -euo pipefail
# shellcheck source=lib/netns.sh
. "$(dirname "$0")/lib/netns.sh"
# shellcheck source=lib/apt_install.sh
. "$(dirname "$0")/lib/apt_install.sh"

WITH_DOCKER=0
for arg in "$@"; do
  case "$arg" in
    --docker) WITH_DOCKER=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg (expected --docker)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "provision_test_hosts.sh: needs root (network namespaces, sshd, dockerd)" >&2
  exit 77
fi

ROOT=${PPSWEEP_TEST_HOSTS:-/tmp/ppsweep-test-hosts}
NS_LIST=${NS_LIST:-"h601 h602 h603 h604"}
BRIDGE=br-infra
NET=10.200.0
SUDO_USER_NAME=ppsweep-test
t0=$(date +%s.%N)
say() { printf 'provision: %s\n' "$*"; }

# -- packages: everything used below (scripts/lib/apt_install.sh) ----------------------------
need() { apt_install provision_test_hosts.sh "$@" || exit 1; }
need openssh-server test -x "$(command -v sshd || echo /usr/sbin/sshd)"
need openssh-client command -v ssh-keygen
need sudo command -v sudo
need iproute2 command -v ip
need util-linux command -v nsenter
if [ "$WITH_DOCKER" = 1 ]; then
  need docker.io command -v dockerd
fi

# -- on failure, tear down what this run started (scripts/teardown_test_hosts.sh) -------------
STARTED=0
on_exit() {
  local rc=$?
  if [ "$rc" != 0 ] && { [ "$STARTED" = 1 ] || [ "$NETNS_STARTED" = 1 ]; }; then
    echo "provision_test_hosts.sh: failed (exit $rc) after starting part of the hosts; tearing them down" >&2
    bash "$(dirname "$0")/teardown_test_hosts.sh" >&2 || true
  fi
}
trap on_exit EXIT

mkdir -p "$ROOT/ssh" "$ROOT/hosts" "$ROOT/sudo" /run/sshd
chmod 700 "$ROOT/ssh" "$ROOT/sudo"

# -- client key -----------------------------------------------------------------------------
if [ ! -f "$ROOT/ssh/id_ed25519" ]; then
  ssh-keygen -q -t ed25519 -N '' -C ppsweep-test-client -f "$ROOT/ssh/id_ed25519"
  say "client key $ROOT/ssh/id_ed25519 created"
fi
# sshd reads authorized_keys as the user logging in: keep it outside the 700 ssh/ folder
mkdir -p "$ROOT/authorized"
chmod 755 "$ROOT" "$ROOT/authorized"
cp "$ROOT/ssh/id_ed25519.pub" "$ROOT/authorized/keys"
chmod 644 "$ROOT/authorized/keys"

# -- sudo test user (password in a file; sudo asks for it) ---------------------------------
if ! id "$SUDO_USER_NAME" >/dev/null 2>&1; then
  useradd --no-create-home --home-dir "$ROOT/home" --shell /bin/sh "$SUDO_USER_NAME"
  say "user $SUDO_USER_NAME created"
fi
usermod --home "$ROOT/home" "$SUDO_USER_NAME"
mkdir -p "$ROOT/home"
chown "$SUDO_USER_NAME" "$ROOT/home"
if [ ! -s "$ROOT/sudo/password" ]; then
  (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$ROOT/sudo/password")
fi
echo "$SUDO_USER_NAME:$(cat "$ROOT/sudo/password")" | chpasswd
printf '%s ALL=(ALL:ALL) ALL\nDefaults:%s !lecture\n' "$SUDO_USER_NAME" "$SUDO_USER_NAME" \
  > /etc/sudoers.d/ppsweep-test
chmod 440 /etc/sudoers.d/ppsweep-test

# -- bridge ---------------------------------------------------------------------------------
bridge_up "$BRIDGE" "$NET.1/24"

# -- fake NVIDIA runtime hook (dockerd registers its "nvidia" device driver when it finds it) -
mkdir -p "$ROOT/fakegpu"
cat > "$ROOT/fakegpu/nvidia-container-runtime-hook" <<EOF
#!/bin/sh
# no-op stand-in for NVIDIA's hook: lets DeviceRequest(capabilities=[["gpu"]]) succeed
echo "\$(date +%T) \$*" >> "$ROOT/fakegpu/hook.log"; cat >/dev/null; exit 0
EOF
chmod +x "$ROOT/fakegpu/nvidia-container-runtime-hook"

: > "$ROOT/ssh/known_hosts.tmp"
: > "$ROOT/hosts.txt.tmp"
i=0
for ns in $NS_LIST; do
  i=$((i + 1)); addr=$NET.$((100 + i)); short=${ns#h}
  d=$ROOT/hosts/$ns; dk=$ROOT/docker/$ns
  mkdir -p "$d"
  netns_up "$ns" "$addr/24" "$BRIDGE" "veth$short" "eth0-$short"
  sshd_up "$ns" "$addr" "$d" "$ROOT/authorized/keys" "SetEnv DOCKER_HOST=unix://$dk/docker.sock"
  echo "$addr $(cut -d' ' -f1,2 "$d/ssh_host_ed25519_key.pub")" >> "$ROOT/ssh/known_hosts.tmp"
  echo "$ns $addr" >> "$ROOT/hosts.txt.tmp"

  if [ "$WITH_DOCKER" = 1 ]; then
    mkdir -p "$dk/data" "$dk/exec"
    if ! alive "$dk/dockerd.bgpid"; then
      rm -f "$dk/dockerd.pid"
      PATH=$ROOT/fakegpu:$PATH nsenter --net="/run/netns/$ns" unshare --uts sh -c \
        "hostname $ns && exec dockerd --data-root $dk/data --exec-root $dk/exec \
           -H unix://$dk/docker.sock --pidfile $dk/dockerd.pid \
           --iptables=false --ip6tables=false --bridge=none" </dev/null >"$dk/dockerd.log" 2>&1 &
      echo $! > "$dk/dockerd.bgpid"
      STARTED=1
      say "dockerd of $ns started (pid $(cat "$dk/dockerd.bgpid"))"
    fi
  fi
done
mv "$ROOT/ssh/known_hosts.tmp" "$ROOT/ssh/known_hosts"
mv "$ROOT/hosts.txt.tmp" "$ROOT/hosts.txt"
# host names resolve (sudo looks its own host name up); a marked block the teardown removes
if ! grep -q '# ppsweep-test-hosts begin' /etc/hosts; then
  { echo "# ppsweep-test-hosts begin"; awk '{print $2, $1}' "$ROOT/hosts.txt"; echo "# ppsweep-test-hosts end"; } >> /etc/hosts
fi

# -- wait until every sshd (and dockerd) answers ------------------------------------------
while read -r ns addr; do
  sshd_wait "$ns" "$addr" "$ROOT/hosts/$ns/sshd.log"
  if [ "$WITH_DOCKER" = 1 ]; then
    sock=$ROOT/docker/$ns/docker.sock; ok=0
    for _ in $(seq 1 200); do
      if docker -H "unix://$sock" version >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.05
    done
    [ "$ok" = 1 ] || { echo "dockerd of $ns does not answer; see $ROOT/docker/$ns/dockerd.log" >&2; exit 1; }
  fi
done < "$ROOT/hosts.txt"

cat > "$ROOT/test-hosts.env" <<EOF
ROOT=$ROOT
HOSTS=$(awk '{printf "%s%s=%s", (NR>1?",":""), $1, $2}' "$ROOT/hosts.txt")
SSH_KEY=$ROOT/ssh/id_ed25519
KNOWN_HOSTS=$ROOT/ssh/known_hosts
SUDO_USER=$SUDO_USER_NAME
SUDO_PASSWORD_FILE=$ROOT/sudo/password
DOCKER=$WITH_DOCKER
DOCKER_SOCKETS=$(for ns in $NS_LIST; do printf '%s=unix://%s/docker/%s/docker.sock,' "$ns" "$ROOT" "$ns"; done | sed 's/,$//')
EOF
say "ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: $(tr '\n' ' ' < "$ROOT/hosts.txt")(docker: $WITH_DOCKER) — $ROOT/test-hosts.env"
