#!/usr/bin/env bash
# Install tmux for the terminal tests (tests/plugin/test_progress.py run pytest in a real
# terminal, 150 x 40, and read its screen with `tmux capture-pane`). Idempotent: does nothing
# when tmux is already there. Exit status: 0 when tmux is usable afterwards, 1 when it could not
# be installed (not root, no apt-get, no candidate). The tests call it when tmux is missing and
# skip with its message when not root (as root a failed install fails them).
set -euo pipefail

if command -v tmux >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_tmux.sh: apt-get not found; install tmux by hand" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_tmux.sh: not root; run: sudo apt-get install tmux" >&2
    exit 1
fi

has_candidate() {
    local candidate
    candidate=$(apt-cache policy tmux 2>/dev/null | awk '/Candidate:/ {print $2}')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

if ! has_candidate; then
    apt-get -o DPkg::Lock::Timeout=300 update -qq
fi
if ! has_candidate; then
    echo "install_tmux.sh: no installation candidate for tmux in the apt sources" >&2
    exit 1
fi
# Wait for a concurrent apt/dpkg run instead of failing on its lock.
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends tmux >/dev/null
command -v tmux >/dev/null 2>&1 || {
    echo "install_tmux.sh: tmux installed but not on PATH" >&2
    exit 1
}
