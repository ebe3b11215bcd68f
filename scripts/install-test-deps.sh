#!/bin/sh
# Install what the test suite needs beyond the Python packages, from Debian's packages:
#   - PostgreSQL server binaries (the tests start a private server from them; see
#     octipusd/testing/postgres.py);
#   - Chromium (the web page's browser tests drive /usr/bin/chromium through Playwright; nothing
#     downloads a browser);
#   - bubblewrap (the shell sandbox's tests run commands in /usr/bin/bwrap).
#
# Idempotent and quiet: installs only what is missing (an initdb under /usr/lib/postgresql/*/bin or
# on PATH; /usr/bin/chromium; /usr/bin/bwrap), with `apt-get install` as root or through sudo.
set -eu

have_initdb() {
    for candidate in /usr/lib/postgresql/*/bin/initdb; do
        [ -x "$candidate" ] && return 0
    done
    command -v initdb >/dev/null 2>&1
}

have_chromium() {
    [ -x /usr/bin/chromium ]
}

have_bwrap() {
    [ -x /usr/bin/bwrap ]
}

missing=""
have_initdb || missing="$missing postgresql"
have_chromium || missing="$missing chromium"
have_bwrap || missing="$missing bubblewrap"
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: missing:$missing and no apt-get to install them;" \
        "install the PostgreSQL server (initdb, pg_ctl), Chromium (/usr/bin/chromium) and bubblewrap" \
        "(/usr/bin/bwrap) with your package manager" >&2
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=""
elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
else
    echo "install-test-deps:$missing must be installed as root (apt-get install$missing)" >&2
    exit 1
fi

echo "install-test-deps: installing$missing" >&2
$as_root apt-get update -qq
# shellcheck disable=SC2086 # one word per package
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null

if ! have_initdb; then
    echo "install-test-deps: postgresql installed but no initdb found" >&2
    exit 1
fi
if ! have_chromium; then
    echo "install-test-deps: chromium installed but /usr/bin/chromium is missing" >&2
    exit 1
fi
if ! have_bwrap; then
    echo "install-test-deps: bubblewrap installed but /usr/bin/bwrap is missing" >&2
    exit 1
fi
