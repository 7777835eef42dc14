#!/usr/bin/env bash
# Real SGLang for CPU in a small Docker image on the test hosts' dockerds, for the Docker-over-SSH
# sweep of the real engine (tests/remote/test_real_docker_remote.py; the session fixture
# sglang_image of tests/support/shared_fixtures.py runs this script).
#
#   sudo bash scripts/build_sglang_image.sh [--tag local/ppsweep-sglang-cpu:test] [--docker unix://SOCK ...] [--check]
#
# The image holds only the minimal Debian root of build_sim_image.sh (its cached debootstrap
# tar: libc, libstdc++, libssl, ... the interpreter links against), a few MB. The engine is not
# copied in: the provisioned environment (scripts/provision_sglang_cpu.sh, 3.5 GB) is bind-mounted
# read-only at run time at the same paths as on this machine, with the interpreter it was made
# from (its pyvenv.cfg `home`) and the tiny models:
#
#   docker run --rm --network host \
#     -v $VENV:$VENV:ro -v $PYTHON_HOME:$PYTHON_HOME:ro -v $MODELS:$MODELS:ro \
#     -e SGLANG_USE_CPU_ENGINE=1 -e HF_HUB_OFFLINE=1 $TAG $VENV/bin/python -m sglang.launch_server ...
#
# The hosts h601-h604 share this machine's file system, so the same paths exist for every
# dockerd. The last lines printed are `PPSWEEP_SGLANG_IMAGE=<tag>`,
# `PPSWEEP_SGLANG_IMAGE_MOUNTS=<the three read-only mounts, comma-separated, as a cluster's
# mounts key takes them>` and `PPSWEEP_SGLANG_IMAGE_RUN=<those docker run options>`.
# --check runs `import sglang` in the image on the first dockerd (about 10 s) and fails if it
# does not print the provisioned version.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/apt_install.sh
. "$HERE/lib/apt_install.sh"
TAG=local/ppsweep-sglang-cpu:test
SOCKS=()
CHECK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --docker) SOCKS+=("$2"); shift 2 ;;
    --check) CHECK=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (expected --tag T, --docker SOCK, --check)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "build_sglang_image.sh: needs root (the test hosts' dockerds)" >&2
  exit 77
fi
apt_install build_sglang_image.sh docker.io command -v docker || exit 1
CACHE_ROOT=${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}
VENV=${PPSWEEP_SGLANG_VENV:-$CACHE_ROOT/venv-sglang-0.5.23}
MODELS=$CACHE_ROOT/models
ROOTFS_TAR=$CACHE_ROOT/sim-image/rootfs-${DEBIAN_SUITE:-bookworm}.tar
if [ "${#SOCKS[@]}" = 0 ]; then
  ENVF=${PPSWEEP_TEST_HOSTS:-/tmp/ppsweep-test-hosts}/test-hosts.env
  [ -f "$ENVF" ] || { echo "no --docker given and no $ENVF: run provision_test_hosts.sh --docker first" >&2; exit 2; }
  IFS=, read -r -a pairs <<< "$(sed -n 's/^DOCKER_SOCKETS=//p' "$ENVF")"
  for p in "${pairs[@]}"; do SOCKS+=("${p#*=}"); done
fi
[ "${#SOCKS[@]}" -gt 0 ] || { echo "no dockerd to load the image into" >&2; exit 2; }
[ -x "$VENV/bin/python" ] || { echo "no provisioned SGLang at $VENV: run scripts/provision_sglang_cpu.sh" >&2; exit 2; }
PYTHON_HOME=$(sed -n 's/^home = //p' "$VENV/pyvenv.cfg")
PYTHON_HOME=${PYTHON_HOME%/bin}
[ -d "$PYTHON_HOME" ] || { echo "the interpreter of $VENV ($PYTHON_HOME) is missing" >&2; exit 2; }
if [ ! -s "$ROOTFS_TAR" ]; then
  # the Debian root is made (and cached) by the emulator image's script
  bash "$HERE/build_sim_image.sh" --docker "${SOCKS[0]}" >&2
fi
t0=$(date +%s.%N)
say() { printf 'build_sglang_image: %s (%.1f s)\n' "$1" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"; }

HASH=$(stat -c '%s %Y' "$ROOTFS_TAR" | sha256sum | cut -c1-16)
has_image() { [ "$(docker -H "$1" image inspect -f '{{index .Config.Labels "ppsweep.source_hash"}}' "$TAG" 2>/dev/null)" = "$HASH" ]; }
pids=()
for s in "${SOCKS[@]}"; do
  has_image "$s" && continue
  docker -H "$s" import -c 'ENV PYTHONUNBUFFERED=1' -c "LABEL ppsweep.source_hash=$HASH" \
    -c 'LABEL org.opencontainers.image.title=ppsweep-sglang-cpu' "$ROOTFS_TAR" "$TAG" >/dev/null &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for s in "${SOCKS[@]}"; do
  has_image "$s" || { echo "image $TAG missing on $s after import" >&2; exit 1; }
done
say "image $TAG present on ${#SOCKS[@]} dockerd(s)"

RUN_OPTS="--network host -v $VENV:$VENV:ro -v $PYTHON_HOME:$PYTHON_HOME:ro -v $MODELS:$MODELS:ro -e SGLANG_USE_CPU_ENGINE=1 -e HF_HUB_OFFLINE=1"
if [ "$CHECK" = 1 ]; then
  want=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))')
  # shellcheck disable=SC2086
  got=$(docker -H "${SOCKS[0]}" run --rm $RUN_OPTS "$TAG" "$VENV/bin/python" -c \
        'import sglang, torch; print(sglang.__version__)' 2>&1 | tail -1)
  [ "$got" = "$want" ] || { echo "sglang in $TAG: expected $want, got: $got" >&2; exit 1; }
  say "checked: sglang $got imports in $TAG with the environment mounted read-only"
fi
echo "PPSWEEP_SGLANG_IMAGE=$TAG"
echo "PPSWEEP_SGLANG_IMAGE_MOUNTS=$VENV:$VENV:ro,$PYTHON_HOME:$PYTHON_HOME:ro,$MODELS:$MODELS:ro"
echo "PPSWEEP_SGLANG_IMAGE_RUN=$RUN_OPTS"
