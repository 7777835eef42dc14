#!/usr/bin/env bash
# Install tmux for the terminal tests (tests/session/test_progress.py run pytest in a real
# terminal, 150 x 40, and read its screen with `tmux capture-pane`). Idempotent: does nothing
# when tmux is already there. Exit status: 0 when tmux is usable afterwards, 1 when it could not
# be installed (not root, no apt-get, no candidate). The tests call it when tmux is missing and
# skip with its message when not root (as root a failed install fails them).
set -euo pipefail
. "$(dirname "$0")/lib/apt_install.sh"
apt_install install_tmux.sh tmux command -v tmux
