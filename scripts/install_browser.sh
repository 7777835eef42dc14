#!/usr/bin/env bash
# Install the headless browser of the browser tests (tests/browser): Debian's `chromium` package,
# driven by Playwright for Python through executable_path=/usr/bin/chromium (Playwright's own
# browser download is not used). Idempotent: does nothing when chromium is already there.
# Exit status: 0 when /usr/bin/chromium is usable afterwards, 1 when it could not be installed
# (not root, no apt-get, no candidate). The browser tests call it when chromium is missing and
# skip with its message when not root (as root a failed install fails them).
set -euo pipefail
. "$(dirname "$0")/lib/apt_install.sh"
apt_install install_browser.sh chromium test -x /usr/bin/chromium
