#!/usr/bin/env bash
# Provision real SGLang for CPU-only machines (tests/real and test_matrix/cpu.toml):
#
#   1. a venv with SGLang 0.5.23 that runs with `--device cpu` on a CPU without AMX:
#      - sglang is installed with --no-deps; its runtime requirements are derived from the wheel's
#        own METADATA minus the CUDA stack (written to $CACHE/sglang-0.5.23-requirements.txt, and
#        the resolved set to $CACHE/sglang-0.5.23-freeze.txt, for the record);
#      - torch 2.13.0 (CPU build);
#      - torchvision guard: PyPI's torchvision is a CUDA build whose _C does not load against CPU
#        torch, and its _meta_registrations.py then crashes at import (unguarded register_fake);
#        sglang imports torchvision unconditionally, so the two decorators are guarded;
#      - sgl_kernel TEST SHIM: with SGLANG_USE_CPU_ENGINE=1 sglang imports names from sgl_kernel
#        at import time, and no CPU build of sgl_kernel is on PyPI. Without AMX every CPU op falls
#        back to torch-native code, so an import-only shim whose functions raise is enough for
#        the tiny models. It is NOT sgl_kernel: never use this venv for performance numbers.
#   2. tiny random models, built offline by tools/make_tiny_models.py, in $CACHE/models/:
#      tiny-llama-h4 (4 heads, so TP4 works) and tiny-qwen3moe (MoE path, EP flags).
#
# CACHE = ${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}; it survives between runs. Idempotent:
# a stamp file records the pinned versions; a second run only checks them (seconds).
# Python: $PPSWEEP_PYTHON (default python3), must be CPython 3.11 (the wheel is cp311).
# Exit 2: no Python 3.11; exit 3: no package index reachable (tests/real skip on these two).
# The last lines are machine-readable: PPSWEEP_SGLANG_PYTHON=..., PPSWEEP_MODEL_<NAME>=...
set -euo pipefail

SGLANG_VERSION=0.5.23
TORCH_VERSION=2.13.0
TORCHVISION_VERSION=0.28.0
SHIM_VERSION=1          # bump when the shim or the torchvision guard changes
REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}
VENV=$CACHE/venv-sglang-$SGLANG_VERSION
MODELS=$CACHE/models
PY=${PPSWEEP_PYTHON:-python3}
REQS=$CACHE/sglang-$SGLANG_VERSION-requirements.txt
FREEZE=$CACHE/sglang-$SGLANG_VERSION-freeze.txt
STAMP=$VENV/.ppsweep-provisioned
T0=$(date +%s)

log() { echo "[provision $(date +%H:%M:%S)] $*" >&2; }
# pip, minus the warnings this machine's pip.conf gives for missing local index folders.
pipq() { "$VENV/bin/python" -m pip "$@" 2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2); }

mkdir -p "$CACHE"
exec 9>"$CACHE/.provision.lock"
flock 9   # concurrent callers (tests, scripts/test.sh) wait for one provisioning

PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$PYVER" != "3.11" ]; then
  echo "provision_sglang_cpu.sh: $PY is Python $PYVER; the sglang $SGLANG_VERSION wheel needs 3.11" \
       "(set PPSWEEP_PYTHON)" >&2
  exit 2
fi

WANT_STAMP="sglang==$SGLANG_VERSION
torch==$TORCH_VERSION
torchvision==$TORCHVISION_VERSION (import guard)
sgl_kernel TEST SHIM v$SHIM_VERSION
python $PYVER"

venv_ok() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_STAMP" ] && [ -x "$VENV/bin/python" ] \
    && [ -f "$VENV/.sgl_kernel_shim_path" ] && [ -f "$(cat "$VENV/.sgl_kernel_shim_path")" ]
}

if venv_ok; then
  log "venv up to date: $VENV"
else
  log "building $VENV (sglang $SGLANG_VERSION for CPU, torch $TORCH_VERSION)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  VPY=$VENV/bin/python
  pipq install --quiet --upgrade pip || { echo "provision: cannot reach a package index" >&2; exit 3; }
  WHEELS=$CACHE/wheels
  mkdir -p "$WHEELS"
  if ! ls "$WHEELS"/sglang-"$SGLANG_VERSION"-*.whl >/dev/null 2>&1; then
    pipq download --quiet --no-deps -d "$WHEELS" "sglang==$SGLANG_VERSION" \
      || { echo "provision: cannot download sglang==$SGLANG_VERSION from the package index" >&2; exit 3; }
  fi
  WHL=$(ls "$WHEELS"/sglang-"$SGLANG_VERSION"-*.whl | head -1)
  # Runtime requirements of the wheel minus extras and minus the CUDA stack: torch==<cuda pin>,
  # sglang-kernel, flashinfer, flash-attn-4, cuda-python, nvidia-*, nvshmem, deep-ep/gemm,
  # flash-mla, quack, tilelang, humming, torch_memory_saver, and audio/video decoders.
  "$VPY" - "$WHL" >"$REQS" <<'PY'
import re, sys, zipfile
# Normalised distribution names (PEP 503) left out: the CUDA stack and CUDA-only media decoders.
DROP = {"torch", "torchvision", "torchaudio", "torchcodec", "torch-memory-saver", "sglang-kernel",
        "sgl-kernel", "cuda-python", "tilelang", "quack-kernels", "humming-kernels",
        "sgl-flash-mla", "av", "decord", "decord2", "timm"}
DROP_PREFIX = ("nvidia-", "cuda-", "flashinfer", "flash-attn", "sgl-deep", "nvshmem")
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
kept, dropped = [], []
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = line.split(":", 1)[1].strip()
    if "extra ==" in req:
        continue
    name = re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]
    norm = re.sub(r"[-_.]+", "-", name).lower()
    if norm in DROP or norm.startswith(DROP_PREFIX):
        dropped.append(f"# dropped (CUDA stack / not needed on CPU): {req}")
        continue
    kept.append(req)
print(f"# runtime requirements of {sys.argv[1].rsplit('/', 1)[-1]} minus the CUDA stack")
print("\n".join(dropped + kept))
PY
  log "derived $(grep -vc '^#' "$REQS") requirements -> $REQS"
  pipq install --quiet "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" -r "$REQS"
  pipq install --quiet --no-deps "$WHL"
  SP=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # torchvision guard (see the header).
  sed -i -E 's/^@torch\.library\.register_fake\("(torchvision::[a-z_]+)"\)/@(torch.library.register_fake("\1") if torchvision.extension._has_ops() else (lambda f: f))  # ppsweep CPU guard/' \
    "$SP/torchvision/_meta_registrations.py"
  grep -q 'ppsweep CPU guard' "$SP/torchvision/_meta_registrations.py" \
    || { echo "provision: the torchvision guard did not apply" >&2; exit 1; }
  # sgl_kernel TEST SHIM (see the header).
  mkdir -p "$SP/sgl_kernel"
  cat >"$SP/sgl_kernel/__init__.py" <<'PY'
# ======================================================================================
#  TEST SHIM -- this is NOT sgl_kernel.
#  Written by pytest-ppsweep's scripts/provision_sglang_cpu.sh so that real SGLang runs
#  with --device cpu on a CPU without AMX, where every op falls back to torch-native code.
#  It only provides import-time names; calling any of them raises NotImplementedError.
#  Numbers measured with it say nothing about SGLang's real CPU performance.
# ======================================================================================
__version__ = "0.0.0+ppsweep.testshim"
PPSWEEP_TEST_SHIM = True


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def _missing(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel TEST SHIM (pytest-ppsweep): {name} is not provided")

    _missing.__name__ = name
    return _missing
PY
  echo "$SP/sgl_kernel/__init__.py" >"$VENV/.sgl_kernel_shim_path"
  SGLANG_USE_CPU_ENGINE=1 "$VPY" -c "import sglang, sglang.srt.server_args, torch, torchvision; \
print('sglang', sglang.__version__, 'torch', torch.__version__, 'torchvision', torchvision.__version__)" >&2
  pipq freeze --all >"$FREEZE"
  printf '%s' "$WANT_STAMP" >"$STAMP"
  log "venv ready after $(( $(date +%s) - T0 )) s"
fi

# Tiny random models: rebuilt when tools/make_tiny_models.py or the venv changes.
MSTAMP_WANT="$(sha256sum "$REPO/tools/make_tiny_models.py" | cut -d' ' -f1) $(cat "$STAMP" | tr '\n' ' ')"
if [ -f "$MODELS/.ppsweep-models" ] && [ "$(cat "$MODELS/.ppsweep-models")" = "$MSTAMP_WANT" ]; then
  log "models up to date: $MODELS"
else
  log "building tiny models in $MODELS"
  rm -rf "$MODELS"
  mkdir -p "$MODELS"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$REPO/tools/make_tiny_models.py" "$MODELS" >&2
  printf '%s' "$MSTAMP_WANT" >"$MODELS/.ppsweep-models"
fi

log "done in $(( $(date +%s) - T0 )) s"
echo "PPSWEEP_SGLANG_PYTHON=$VENV/bin/python"
for d in "$MODELS"/*/; do
  name=$(basename "$d")
  echo "PPSWEEP_MODEL_$(echo "$name" | tr 'a-z-' 'A-Z_')=${d%/}"
done
