# Sourced by the provision_*.sh scripts: network-namespace "hosts" on a bridge, and an sshd as
# PID 1 of its own PID namespace in one of them. Messages go through the caller's `say`.
# NETNS_STARTED=1 once any of them created or started something (the caller's failure trap
# tears down only when it is set).
NETNS_STARTED=0

# alive PIDFILE: the pid file's process runs (a zombie does not count: this init may not reap
# orphans)
alive() {
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null \
    && ! grep -q '^State:[[:space:]]*Z' "/proc/$(cat "$1")/status" 2>/dev/null
}

# bridge_up BRIDGE ADDRESS/PREFIX: the bridge exists, holds the address and is up
bridge_up() {
  if ! ip link show "$1" >/dev/null 2>&1; then
    ip link add "$1" type bridge
    NETNS_STARTED=1
    say "bridge $1 created"
  fi
  ip addr replace "$2" dev "$1"
  ip link set "$1" up
}

# netns_up NS ADDRESS/PREFIX BRIDGE HOST_VETH NS_VETH: namespace NS with eth0 (ADDRESS) on a veth
# whose other end (HOST_VETH) is on BRIDGE; nothing is done when NS exists. No default route:
# traffic stays on the bridge's network.
netns_up() {
  local ns=$1 addr=$2 bridge=$3 hv=$4 nv=$5
  ip netns list | grep -qw "^$ns" && return 0
  ip netns add "$ns"
  NETNS_STARTED=1
  ip link del "$hv" 2>/dev/null || true  # a pair left by a namespace still going away
  ip link add "$hv" type veth peer name "$nv"
  ip link set "$hv" master "$bridge" up
  ip link set "$nv" netns "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$nv" name eth0
  ip -n "$ns" addr add "$addr" dev eth0
  ip -n "$ns" link set eth0 up
  say "namespace $ns (${addr%/*}) created"
}

# sshd_up NS ADDRESS DIR AUTHORIZED_KEYS [EXTRA_LINE...]: an sshd listening on ADDRESS:22 in
# namespace NS (host key, config, log and host.pid under DIR; EXTRA_LINEs end its config),
# reloaded when its config changed, started when it does not run. It is PID 1 of its own PID
# namespace: it reaps orphans (a rank started with setsid over SSH is re-parented to it), and
# killing it ends every process of that host; a private mount namespace gives the host its own
# /proc and /dev/shm, and its own UTS namespace the host name NS.
sshd_up() {
  local ns=$1 addr=$2 d=$3 keys=$4 sshd changed=0
  shift 4
  sshd=$(command -v sshd || echo /usr/sbin/sshd)
  mkdir -p "$d" /run/sshd
  [ -f "$d/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$d/ssh_host_ed25519_key"
  {
    cat <<CONF
ListenAddress $addr:22
HostKey $d/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile $keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 200:30:400
MaxSessions 100
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel INFO
CONF
    for line in "$@"; do printf '%s\n' "$line"; done
  } > "$d/sshd_config.new"
  "$sshd" -t -f "$d/sshd_config.new" >&2
  cmp -s "$d/sshd_config.new" "$d/sshd_config" || changed=1
  mv "$d/sshd_config.new" "$d/sshd_config"
  if alive "$d/host.pid" && [ "$changed" = 1 ]; then
    # sshd re-reads its configuration on SIGHUP; it is the only child of unshare
    for p in $(ps -o pid= --ppid "$(cat "$d/host.pid")"); do kill -HUP "$p"; done
    say "sshd of $ns reloaded (configuration changed)"
  fi
  if ! alive "$d/host.pid"; then
    # unshare forks sshd as PID 1 of a new PID namespace (--kill-child: killing unshare ends
    # the host)
    nsenter --net="/run/netns/$ns" unshare --uts --pid --fork --kill-child --mount-proc \
      sh -c "hostname $ns && mount -t tmpfs -o mode=1777,size=1g shm /dev/shm && \
             exec $sshd -D -f $d/sshd_config -E $d/sshd.log" </dev/null >"$d/host.out" 2>&1 &
    echo $! > "$d/host.pid"
    NETNS_STARTED=1
    say "sshd of $ns started (pid $(cat "$d/host.pid"))"
  fi
}

# sshd_wait NAME ADDRESS LOG: bounded wait until ADDRESS:22 answers (exit 1 naming LOG if not)
sshd_wait() {
  local i
  for i in $(seq 1 100); do
    (exec 3<>"/dev/tcp/$2/22") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "sshd of $1 ($2) does not answer; see $3" >&2
  exit 1
}
