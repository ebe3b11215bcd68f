#!/bin/sh
# Install what the test suite needs beyond the Python packages: PostgreSQL server binaries
# (the tests start a private server from them; see octipusd/testing/postgres.py).
#
# Idempotent and quiet: does nothing when an initdb is already present under
# /usr/lib/postgresql/*/bin or on PATH. Otherwise runs
# `apt-get update && apt-get install -y postgresql` (as root, or through sudo).
set -eu

have_initdb() {
    for candidate in /usr/lib/postgresql/*/bin/initdb; do
        [ -x "$candidate" ] && return 0
    done
    command -v initdb >/dev/null 2>&1
}

if have_initdb; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: no initdb found and no apt-get to install PostgreSQL;" \
        "install the PostgreSQL server (initdb, pg_ctl) with your package manager" >&2
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
else
    echo "install-test-deps: PostgreSQL must be installed as root (apt-get install postgresql)" >&2
    exit 1
fi

echo "install-test-deps: installing PostgreSQL (no initdb found)" >&2
$as_root apt-get update -qq
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null

if ! have_initdb; then
    echo "install-test-deps: postgresql installed but no initdb found" >&2
    exit 1
fi
