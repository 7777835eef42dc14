#!/usr/bin/env bash
# Build the emulator's image without a registry and load it into every test host's dockerd.
#
#   sudo bash scripts/build_sim_image.sh [--tag local/ppsweep-sim:test] [--docker unix://SOCK ...]
#
# Without --docker the sockets come from $PPSWEEP_TEST_HOSTS/test-hosts.env (written by
# provision_test_hosts.sh --docker). The image holds a minimal Debian root (debootstrap, with
# python3), aiohttp and its dependencies (wheels fetched once with `pip download`) and this
# package's source, so `python3 -m pytest_ppsweep.sim` and `python3 -m pytest_ppsweep.sim.smi` run in
# it. Everything slow is cached under ${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}/sim-image:
#   rootfs-<suite>.tar     debootstrap output (about 30 s once)
#   wheels/                aiohttp wheels for the image's Python
#   <tag>-<hash>.tar       the saved image; <hash> covers the rootfs, the wheels and the source
# A host whose dockerd already has the tag with the same hash label is left alone.
set -euo pipefail
# shellcheck source=lib/apt_install.sh
. "$(dirname "$0")/lib/apt_install.sh"

REPO=$(cd "$(dirname "$0")/.." && pwd)
TAG=local/ppsweep-sim:test
SOCKS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --docker) SOCKS+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (expected --tag T, --docker SOCK)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "build_sim_image.sh: needs root (debootstrap)" >&2
  exit 77
fi
if [ "${#SOCKS[@]}" = 0 ]; then
  ENVF=${PPSWEEP_TEST_HOSTS:-/tmp/ppsweep-test-hosts}/test-hosts.env
  [ -f "$ENVF" ] || { echo "no --docker given and no $ENVF: run provision_test_hosts.sh --docker first" >&2; exit 2; }
  IFS=, read -r -a pairs <<< "$(sed -n 's/^DOCKER_SOCKETS=//p' "$ENVF")"
  for p in "${pairs[@]}"; do SOCKS+=("${p#*=}"); done
fi
[ "${#SOCKS[@]}" -gt 0 ] || { echo "no dockerd to load the image into" >&2; exit 2; }

CACHE=${PPSWEEP_CACHE:-$HOME/.cache/pytest-ppsweep}/sim-image
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PY=${PYTHON:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
ARCH=$(uname -m)
mkdir -p "$CACHE/wheels"
t0=$(date +%s.%N)
say() { printf 'build_sim_image: %s (%.1f s)\n' "$1" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')"; }

# what it uses: debootstrap, and the docker client (it talks to the hosts' dockerds)
apt_install build_sim_image.sh debootstrap command -v debootstrap || exit 1
apt_install build_sim_image.sh docker.io command -v docker || exit 1

# 1. the Debian root with python3 (cached)
ROOTFS_TAR=$CACHE/rootfs-$SUITE.tar
if [ ! -s "$ROOTFS_TAR" ]; then
  tmp=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  debootstrap --variant=minbase --include=python3,procps "$SUITE" "$tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { echo "debootstrap failed; see $CACHE/debootstrap.log" >&2; rm -rf "$tmp"; exit 1; }
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
  tar -C "$tmp" -cf "$ROOTFS_TAR.part" .
  mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
  rm -rf "$tmp"
  say "debootstrap $SUITE → $ROOTFS_TAR"
fi

# 2. aiohttp wheels for the image's Python 3.11 (cached; the emulator's only dependency)
AIOHTTP=$("$PY" -c 'import aiohttp; print(aiohttp.__version__)' 2>/dev/null || echo "")
SPEC=aiohttp${AIOHTTP:+==$AIOHTTP}
if ! ls "$CACHE/wheels"/aiohttp-"${AIOHTTP:-}"*.whl >/dev/null 2>&1; then
  "$PY" -m pip download --quiet --dest "$CACHE/wheels" --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    --platform "manylinux2014_$ARCH" --platform "manylinux_2_17_$ARCH" --platform any "$SPEC" 2>&1 \
    | { grep -v '^WARNING: Location' || true; }
  say "wheels for $SPEC downloaded"
fi

# 3. content hash: rootfs + wheels + this package's source
HASH=$( { stat -c '%s %Y' "$ROOTFS_TAR"; ls "$CACHE/wheels";
          cd "$REPO" && find pytest_ppsweep -type f \( -name '*.py' -o -name '*.toml' -o -name py.typed \) \
            -not -path '*/__pycache__/*' | sort | xargs sha256sum; } | sha256sum | cut -c1-16)
IMAGE_TAR=$CACHE/$(echo "$TAG" | tr '/:' '__')-$HASH.tar

has_image() { [ "$(docker -H "$1" image inspect -f '{{index .Config.Labels "ppsweep.source_hash"}}' "$TAG" 2>/dev/null)" = "$HASH" ]; }

# 4. build once (into the first dockerd), keep the saved image in the cache
if [ ! -s "$IMAGE_TAR" ]; then
  first=${SOCKS[0]}
  if ! has_image "$first"; then
    stage=$(mktemp -d /tmp/ppsweep-sim-image.XXXXXX)
    trap 'rm -rf "$stage"' EXIT
    tar -C "$stage" -xf "$ROOTFS_TAR"
    site=$stage/usr/local/lib/python3.11/dist-packages
    mkdir -p "$site"
    "$PY" -m pip install --quiet --no-index --find-links "$CACHE/wheels" --target "$site" \
      --no-compile --python-version 3.11 --only-binary=:all: "$SPEC" 2>&1 \
      | { grep -v '^WARNING: Location' || true; }
    # the package itself: its source plus a minimal dist-info, so importlib.metadata knows it
    (cd "$REPO" && find pytest_ppsweep -type f \( -name '*.py' -o -name '*.toml' -o -name py.typed \) \
       -not -path '*/__pycache__/*' | tar -cf - -T - ) | tar -C "$site" -xf -
    version=$("$PY" -c 'import tomllib; print(tomllib.load(open("'"$REPO"'/pyproject.toml","rb"))["project"]["version"])')
    mkdir -p "$site/pytest_ppsweep-$version.dist-info"
    printf 'Metadata-Version: 2.1\nName: pytest-ppsweep\nVersion: %s\n' "$version" \
      > "$site/pytest_ppsweep-$version.dist-info/METADATA"
    echo pytest_ppsweep > "$site/pytest_ppsweep-$version.dist-info/top_level.txt"
    tar -C "$stage" -cf - . | docker -H "$first" import \
      -c 'CMD ["python3"]' -c 'ENV PYTHONUNBUFFERED=1' \
      -c "LABEL ppsweep.source_hash=$HASH" -c 'LABEL org.opencontainers.image.title=ppsweep-sim' \
      - "$TAG" >/dev/null
    rm -rf "$stage"; trap - EXIT
    say "image $TAG imported into $first"
  fi
  docker -H "$first" save -o "$IMAGE_TAR.part" "$TAG"
  mv "$IMAGE_TAR.part" "$IMAGE_TAR"
  # older saved images of this tag are stale now
  find "$CACHE" -maxdepth 1 -name "$(echo "$TAG" | tr '/:' '__')-*.tar" ! -name "$(basename "$IMAGE_TAR")" -delete
  say "image saved to $IMAGE_TAR"
fi

# 5. load into every dockerd that lacks it (in parallel)
pids=()
for s in "${SOCKS[@]}"; do
  if has_image "$s"; then continue; fi
  docker -H "$s" load -q -i "$IMAGE_TAR" >/dev/null &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for s in "${SOCKS[@]}"; do
  has_image "$s" || { echo "image $TAG missing on $s after load" >&2; exit 1; }
  # the image this tag pointed to before (an older source hash) is dangling now: free its space
  docker -H "$s" image prune -f >/dev/null
done
say "image $TAG (source hash $HASH) present on ${#SOCKS[@]} dockerd(s)"
