#!/usr/bin/env bash
# A real one-host Slurm for the tests: slurmctld on this host and one slurmd per node, each node a
# network namespace s701-s704 (10.201.0.101-104) on bridge br-slurm (10.201.0.1/24) with its own
# UTS (hostname = NodeName), PID and mount namespace (own /dev/shm), like the SSH test hosts
# h601-h604 (scripts/provision_test_hosts.sh), which it leaves alone; both build their
# namespaces with scripts/lib/netns.sh. Node s701 is also the cluster's login node: an sshd
# there (root, key login) whose sessions are Slurm clients (SLURM_CONF set by the sshd).
#
#   sudo bash scripts/provision_slurm.sh      # idempotent; prints what it did
#   sudo bash scripts/teardown_slurm.sh       # stops and removes all of it
#
# Everything lives under $PPSWEEP_SLURM_ROOT (default /tmp/ppsweep-slurm):
#   slurm.conf            self-contained (clients read it through SLURM_CONF=<root>/slurm.conf)
#   munge/                key, socket, log of the cluster's own munged
#   ctld/                 state, log, pid of slurmctld
#   nodes/<n>/            spool, log, pid of node <n>'s slurmd
#   login/                the login node's sshd: config, host key, log, pid
#   ssh/                  client key and known_hosts for the login node
#   slurm.env             KEY=VALUE summary read by the tests (SLURM_CONF, NODES, LOGIN, ...)
# No cgroups: proctrack/linuxproc, task/none; select/cons_tres by core and memory
# (CR_Core_Memory: a job without --mem holds its nodes' memory), gres gpu:8 per node (gres.conf
# File= character devices like /dev/null under $ROOT/dev: no GPU behind them), so --exclusive,
# --cpus-per-task, --mem, --gpus-per-node and --gres mean what they mean on a GPU cluster; steps
# --overlap. ReturnToService=2: a node set DOWN is back once its slurmd registers again (a test
# that needs it kept out drains it as well).
# It installs every package it uses (scripts/lib/apt_install.sh), and when it fails after
# starting or creating anything, it tears the cluster down (scripts/teardown_slurm.sh): no
# slurmctld, slurmd or namespace is left behind by a failed run.
set -euo pipefail
HERE=$(dirname "$0")
# shellcheck source=lib/netns.sh
. "$HERE/lib/netns.sh"
# shellcheck source=lib/apt_install.sh
. "$HERE/lib/apt_install.sh"
if [ "$(id -u)" != 0 ]; then
  echo "provision_slurm.sh: needs root (network namespaces, munged, slurmd)" >&2
  exit 77
fi
ROOT=${PPSWEEP_SLURM_ROOT:-/tmp/ppsweep-slurm}
NODES=${SLURM_NODES:-"s701 s702 s703 s704"}
BRIDGE=br-slurm
NET=10.201.0
CPUS=${SLURM_NODE_CPUS:-2}
MEM_MB=${SLURM_NODE_MEM_MB:-4000}  # RealMemory of each node (below this machine's: slurmd checks it)
GPUS=${SLURM_NODE_GPUS:-8}  # gres gpu:<n> per node (the emulator's GPUs; see gres.conf below)
t0=$(date +%s.%N)
say() { printf 'provision_slurm: %s\n' "$*"; }
# -- packages: everything used below ------------------------------------------------------------
need() { apt_install provision_slurm.sh "$@" || exit 1; }
need slurmctld command -v slurmctld
need slurmd command -v slurmd
need slurm-client command -v srun
need munge command -v munged
need openssh-server test -x "$(command -v sshd || echo /usr/sbin/sshd)"
need openssh-client command -v ssh-keygen
need iproute2 command -v ip
need util-linux command -v nsenter
need python3 command -v python3

# -- on failure, tear down what this run started ----------------------------------------------
STARTED=0
on_exit() {
  local rc=$?
  if [ "$rc" != 0 ] && { [ "$STARTED" = 1 ] || [ "$NETNS_STARTED" = 1 ]; }; then
    echo "provision_slurm.sh: failed (exit $rc) after starting part of the cluster; tearing it down" >&2
    bash "$HERE/teardown_slurm.sh" >&2 || true
  fi
}
trap on_exit EXIT
mkdir -p "$ROOT/munge" "$ROOT/ctld" "$ROOT/nodes"
chmod 755 "$ROOT"

# -- munge: a key and a munged of this cluster's own (socket under ROOT) ---------------------
chmod 700 "$ROOT/munge"
[ -s "$ROOT/munge/munge.key" ] || { head -c 1024 /dev/urandom > "$ROOT/munge/munge.key"; chmod 400 "$ROOT/munge/munge.key"; }
if ! alive "$ROOT/munge/munged.pid"; then
  rm -f "$ROOT/munge/munge.socket" "$ROOT/munge/munge.socket.lock"
  munged --force --key-file="$ROOT/munge/munge.key" --socket="$ROOT/munge/munge.socket" \
    --pid-file="$ROOT/munge/munged.pid" --log-file="$ROOT/munge/munged.log" \
    --seed-file="$ROOT/munge/munged.seed"
  STARTED=1
  say "munged started (pid $(cat "$ROOT/munge/munged.pid"))"
fi
chmod 711 "$ROOT/munge"

# -- bridge and node namespaces --------------------------------------------------------------
bridge_up "$BRIDGE" "$NET.1/24"
i=0; node_lines=""; names=""
for n in $NODES; do
  i=$((i + 1)); addr=$NET.$((100 + i)); short=${n#s}
  netns_up "$n" "$addr/24" "$BRIDGE" "vs$short" "eth0-s$short"
  node_lines+="NodeName=$n NodeAddr=$addr CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:$GPUS State=UNKNOWN"$'\n'
  names+="${names:+,}$n=$addr"
done

cat > "$ROOT/slurm.conf.new" <<CONF
# Written by scripts/provision_slurm.sh: a test cluster of network-namespace nodes.
ClusterName=ppsweep-test
SlurmctldHost=$(hostname -s)($NET.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$ROOT/munge/munge.socket
StateSaveLocation=$ROOT/ctld/state
SlurmctldPidFile=$ROOT/ctld/slurmctld.pid
SlurmctldLogFile=$ROOT/ctld/slurmctld.log
SlurmdSpoolDir=$ROOT/nodes/%n/spool
SlurmdPidFile=$ROOT/nodes/%n/slurmd.pid
SlurmdLogFile=$ROOT/nodes/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
MpiDefault=none
SwitchType=switch/none
LaunchParameters=use_interactive_step
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=20
SchedulerParameters=sched_interval=1
SlurmctldDebug=info
SlurmdDebug=info
$node_lines
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
# the nodes' GPUs for Slurm: character devices like /dev/null (no GPU is behind them; the
# emulator's nvidia-smi shim answers for the GPUs), one per GPU, as gres.conf File= wants
mkdir -p "$ROOT/dev"
for g in $(seq 0 $((GPUS - 1))); do
  [ -c "$ROOT/dev/gpu$g" ] || mknod -m 666 "$ROOT/dev/gpu$g" c 1 3
done
printf 'AutoDetect=off\nName=gpu File=%s/dev/gpu[0-%s]\n' "$ROOT" "$((GPUS - 1))" > "$ROOT/gres.conf.new"
changed=0
cmp -s "$ROOT/slurm.conf.new" "$ROOT/slurm.conf" || changed=1
cmp -s "$ROOT/gres.conf.new" "$ROOT/gres.conf" || changed=1
mv "$ROOT/gres.conf.new" "$ROOT/gres.conf"
mv "$ROOT/slurm.conf.new" "$ROOT/slurm.conf"
export SLURM_CONF=$ROOT/slurm.conf

# -- slurmctld on this host --------------------------------------------------------------------
if alive "$ROOT/ctld/slurmctld.pid" && [ "$changed" = 1 ]; then
  kill "$(cat "$ROOT/ctld/slurmctld.pid")"; for _ in $(seq 1 100); do alive "$ROOT/ctld/slurmctld.pid" || break; sleep 0.1; done
  say "slurmctld stopped (configuration changed)"
fi
if ! alive "$ROOT/ctld/slurmctld.pid"; then
  rm -rf "$ROOT/ctld/state"; mkdir -p "$ROOT/ctld/state"
  STARTED=1
  slurmctld -c -f "$SLURM_CONF" </dev/null >"$ROOT/ctld/slurmctld.out" 2>&1
  say "slurmctld started"
fi

# -- one slurmd per node, as the init-reaped child of the node's own PID namespace -------------
INIT='import os,signal,subprocess,sys
p=subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGTERM,lambda *a:p.terminate())
while True:
    pid,st=os.wait()
    if pid==p.pid: sys.exit(0)'
for n in $NODES; do
  d=$ROOT/nodes/$n; mkdir -p "$d/spool"
  if alive "$d/node.pid" && [ "$changed" = 1 ]; then
    kill -KILL "$(cat "$d/node.pid")"; for _ in $(seq 1 50); do alive "$d/node.pid" || break; sleep 0.1; done
  fi
  if ! alive "$d/node.pid"; then
    nsenter --net="/run/netns/$n" unshare --uts --pid --fork --kill-child --mount-proc \
      sh -c "hostname $n && mount -t tmpfs -o mode=1777,size=1g shm /dev/shm && \
             exec python3 -c '$INIT' slurmd -D -N $n -f $SLURM_CONF" </dev/null >"$d/node.out" 2>&1 &
    echo $! > "$d/node.pid"
    STARTED=1
    say "slurmd of $n started (pid $!)"
  fi
done

# -- the login node: an sshd in the first node's namespace, its sessions Slurm clients ------------
LOGIN_NS=$(echo $NODES | cut -d' ' -f1); LOGIN=$NET.101
mkdir -p "$ROOT/ssh" "$ROOT/login"; chmod 700 "$ROOT/ssh"
[ -f "$ROOT/ssh/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C ppsweep-slurm-client -f "$ROOT/ssh/id_ed25519"
cp "$ROOT/ssh/id_ed25519.pub" "$ROOT/login/authorized_keys"; chmod 644 "$ROOT/login/authorized_keys"
sshd_up "$LOGIN_NS" "$LOGIN" "$ROOT/login" "$ROOT/login/authorized_keys" "SetEnv SLURM_CONF=$SLURM_CONF"
echo "$LOGIN $(cut -d' ' -f1,2 "$ROOT/login/ssh_host_ed25519_key.pub")" > "$ROOT/ssh/known_hosts"
sshd_wait "$LOGIN_NS" "$LOGIN" "$ROOT/login/sshd.log"

# -- wait until every node is idle ---------------------------------------------------------------
ok=0
for _ in $(seq 1 300); do
  if [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -cE ' (idle|mix|alloc)$')" = "$(echo $NODES | wc -w)" ]; then ok=1; break; fi
  sleep 0.1
done
if [ "$ok" != 1 ]; then
  # a node left DOWN by an earlier test run comes back
  scontrol update NodeName="$(echo $NODES | tr ' ' ',')" State=RESUME >/dev/null 2>&1 || true
  for _ in $(seq 1 100); do
    if [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -cE ' (idle|mix|alloc)$')" = "$(echo $NODES | wc -w)" ]; then ok=1; break; fi
    sleep 0.1
  done
fi
if [ "$ok" != 1 ]; then
  echo "provision_slurm.sh: nodes not idle: $(sinfo -h -N -o '%N %t' 2>&1 | tr '\n' ' '); see $ROOT/ctld/slurmctld.log and $ROOT/nodes/*/slurmd.log" >&2
  exit 1
fi
cat > "$ROOT/slurm.env" <<ENV
SLURM_CONF=$SLURM_CONF
NODES=$names
LOGIN=$LOGIN
SSH_KEY=$ROOT/ssh/id_ed25519
KNOWN_HOSTS=$ROOT/ssh/known_hosts
ENV
say "ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: $(sinfo -h -N -o '%N:%t' | tr '\n' ' ')— $ROOT/slurm.env"
