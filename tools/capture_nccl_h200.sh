#!/usr/bin/env bash
# Capture real NCCL data on a GPU host (the device tool's nvidia-h200 kinds): what the tests in
# tests/data/h200-1gpu/ and tests/data/nccl-h200/ are made of. Needs torch alone (the host's
# python3), nothing of this project but the two torch-only scripts of pytest_ppsweep/comm/.
#
#   bash tools/capture_nccl_h200.sh OUT_DIR [WORLD_SIZE ...]
#
# World sizes: default 2 4 8 (those the host has GPUs for), or 1 on a one-GPU host. Writes
# OUT_DIR/capture.tar.gz holding, in capture/:
#   versions.txt          date, kernel, driver, torch / CUDA / NCCL versions, GPU count, env
#   nvidia-smi.txt, topo-m.txt, smi-q.txt, smi-q.xml, nvlink-s.txt   nvidia-smi as it answered
#   allreduce-w<N>.log    allreduce_worker.py, N ranks on GPUs 0..N-1, 1 KiB-256 MiB: its stdout,
#                         the JSON lines among NCCL_DEBUG=INFO's lines (NCCL logs to stdout), as
#                         a node log of the plugin's comm step looks
#   allreduce-w<N>.stderr.txt  its stderr
#   traces-w<N>/          layers_trace.py: per rank a gzipped torch-profiler trace + summary.json
#   layers-w<N>.log       its stdout/stderr (NCCL_DEBUG=INFO)
#   status.txt            the exit status of every step
# and OUT_DIR/run.log (this script's progress).
set -u
OUT=${1:?usage: capture_nccl_h200.sh OUT_DIR [WORLD_SIZE ...]}
shift
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
here=$(cd "$(dirname "$0")/.." && pwd)
comm="${COMM_DIR:-$here/pytest_ppsweep/comm}"
PY=${PY:-python3}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$#" -gt 0 ]; then
  worlds="$*"
elif [ "$ngpu" -le 1 ]; then
  worlds=1
else
  worlds=""
  for w in 2 4 8; do [ "$w" -le "$ngpu" ] && worlds="$worlds $w"; done
fi
mkdir -p "$OUT"
work=$(mktemp -d)
cap="$work/capture"
mkdir -p "$cap"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/run.log"; }
step() {  # step NAME CMD...: run, record its exit status
  local name=$1; shift
  log "$name: $*"
  "$@"
  local rc=$?
  echo "$name $rc" >>"$cap/status.txt"
  log "$name exited $rc"
}
log "GPUs: $ngpu; world sizes: $worlds"
{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -r)"
  echo "nproc: $(nproc)"
  nvidia-smi --version 2>&1 | sed 's/^/nvidia-smi: /'
  "$PY" -c 'import sys, torch
v = torch.cuda.nccl.version()
print("python:", sys.version.split()[0])
print("torch:", torch.__version__)
print("torch.version.cuda:", torch.version.cuda)
print("nccl:", ".".join(map(str, v)) if isinstance(v, tuple) else v)
print("cuda devices:", torch.cuda.device_count())
print("device 0:", torch.cuda.get_device_name(0))
print("capability:", torch.cuda.get_device_capability(0))'
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort | sed 's/^/env: /'
} >"$cap/versions.txt" 2>&1
step nvidia-smi sh -c "nvidia-smi >'$cap/nvidia-smi.txt' 2>&1"
step topo-m sh -c "nvidia-smi topo -m >'$cap/topo-m.txt' 2>&1"
step smi-q sh -c "nvidia-smi -q >'$cap/smi-q.txt' 2>&1"
step smi-q-xml sh -c "nvidia-smi -q -x >'$cap/smi-q.xml' 2>&1"
step nvlink-s sh -c "nvidia-smi nvlink -s >'$cap/nvlink-s.txt' 2>&1"
for w in $worlds; do
  devs=$(seq -s, 0 $((w - 1)))
  step "allreduce-w$w" sh -c "NCCL_DEBUG=INFO timeout 400 '$PY' '$comm/allreduce_worker.py' \
    --nproc-per-node $w --devices $devs --master-addr 127.0.0.1 --master-port $((29600 + w)) \
    --timeout-s 120 >'$cap/allreduce-w$w.log' 2>'$cap/allreduce-w$w.stderr.txt'"
  step "layers-w$w" sh -c "NCCL_DEBUG=INFO timeout 300 '$PY' '$comm/layers_trace.py' --world $w \
    --out '$cap/traces-w$w' --master-port $((29700 + w)) >'$cap/layers-w$w.log' 2>&1"
done
tar -C "$work" -czf "$OUT/capture.tar.gz" capture
log "wrote $OUT/capture.tar.gz ($(du -h "$OUT/capture.tar.gz" | cut -f1))"
cat "$cap/status.txt" | tee -a "$OUT/run.log"
