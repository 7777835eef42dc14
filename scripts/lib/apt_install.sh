# Sourced by the install_*.sh scripts: install one Debian package, idempotently.
#
#   apt_install SCRIPT PACKAGE CHECK...
#
# CHECK is a command that succeeds once the tool is usable (`test -x /usr/bin/chromium`,
# `command -v tmux`). Returns 0 when it succeeds afterwards, 1 when the package could not be
# installed (not root, no apt-get, no candidate), each with a message on stderr naming SCRIPT.
apt_install() {
    local script=$1 package=$2
    shift 2
    if "$@" >/dev/null 2>&1; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$script: apt-get not found; install $package by hand" >&2
        return 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "$script: not root; run: sudo apt-get install $package" >&2
        return 1
    fi
    if ! _apt_has_candidate "$package"; then
        apt-get -o DPkg::Lock::Timeout=300 update -qq
    fi
    if ! _apt_has_candidate "$package"; then
        echo "$script: no installation candidate for $package in the apt sources" >&2
        return 1
    fi
    # Wait for a concurrent apt/dpkg run instead of failing on its lock.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
        --no-install-recommends "$package" >/dev/null
    if ! "$@" >/dev/null 2>&1; then
        echo "$script: $package installed but \`$*\` still fails" >&2
        return 1
    fi
}

_apt_has_candidate() {
    local candidate
    candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
    [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}
