#!/usr/bin/env bash
# Set up a development machine for scopeflow (idempotent, safe to re-run).
#
#   scripts/setup.sh          system packages (if missing) + .venv
#   scripts/setup.sh system   only Java 17 and graphviz `dot` (if missing)
#   scripts/setup.sh venv     only .venv + `pip install -e '.[dev]'`
#
# System packages come from apt-get (with sudo when not root). When apt is not
# available or fails, a message says what to install by hand and setup goes
# on: Spark needs Java; tests that need `dot` skip without it.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
STAMP="$VENV/.installed"

say()  { printf '[setup] %s\n' "$*"; }
warn() { printf '[setup] WARNING: %s\n' "$*" >&2; }

# Run apt-get as root, or through non-interactive sudo. Fails if neither works.
apt_get() {
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n env DEBIAN_FRONTEND=noninteractive apt-get "$@"
    else
        return 1
    fi
}

APT_UPDATED=0
apt_install() {   # apt_install PKG... ; returns non-zero on any failure
    command -v apt-get >/dev/null 2>&1 || return 1
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        apt_get update -qq || return 1
        APT_UPDATED=1
    fi
    say "apt-get install $*"
    apt_get install -y -qq --no-install-recommends "$@"
}

setup_system() {
    if command -v java >/dev/null 2>&1; then
        say "java found: $(command -v java)"
    elif apt_install openjdk-17-jre-headless || apt_install default-jre-headless; then
        say "installed Java"
    else
        warn "could not install Java. Install a Java 17+ runtime by hand" \
             "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) -- Spark needs it."
    fi

    if command -v dot >/dev/null 2>&1; then
        say "graphviz dot found: $(command -v dot)"
    elif apt_install graphviz; then
        say "installed graphviz"
    else
        warn "could not install graphviz. Install it by hand" \
             "(Debian/Ubuntu: apt-get install graphviz) -- tests that need 'dot' will skip."
    fi
}

setup_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        # Debian's python3 lacks ensurepip until python3-venv is installed.
        if ! "$PYTHON" -c 'import ensurepip' >/dev/null 2>&1; then
            apt_install python3-venv \
                || warn "python3 -m venv needs the python3-venv package; install it by hand."
        fi
        say "creating $VENV with $("$PYTHON" --version 2>&1)"
        "$PYTHON" -m venv "$VENV"
    fi
    if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
        say "pip install -e '.[dev]'"
        "$VENV/bin/python" -m pip install -q -e '.[dev]'
        touch "$STAMP"
    else
        say "$VENV is up to date with pyproject.toml"
    fi
}

case "${1:-all}" in
    system) setup_system ;;
    venv)   setup_venv ;;
    all)    setup_system; setup_venv ;;
    *)      echo "usage: $0 [all|system|venv]" >&2; exit 2 ;;
esac
