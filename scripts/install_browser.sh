#!/usr/bin/env bash
# Install the headless browser of the browser tests (tests/browser): Debian's `chromium` package,
# driven by Playwright for Python through executable_path=/usr/bin/chromium (Playwright's own
# browser download is not used). Idempotent: does nothing when chromium is already there.
# Exit status: 0 when /usr/bin/chromium is usable afterwards, 1 when it could not be installed
# (not root, no apt-get, no candidate). The browser tests call it when chromium is missing and
# skip with its message when not root (as root a failed install fails them).
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser.sh: apt-get not found; install chromium by hand" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_browser.sh: not root; run: sudo apt-get install chromium" >&2
    exit 1
fi

has_candidate() {
    local candidate
    candidate=$(apt-cache policy chromium 2>/dev/null | awk '/Candidate:/ {print $2}')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

if ! has_candidate; then
    apt-get -o DPkg::Lock::Timeout=300 update -qq
fi
if ! has_candidate; then
    echo "install_browser.sh: no installation candidate for chromium in the apt sources" >&2
    exit 1
fi
# Wait for a concurrent apt/dpkg run instead of failing on its lock.
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
    --no-install-recommends chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
    echo "install_browser.sh: chromium installed but $CHROMIUM is missing" >&2
    exit 1
fi
