#!/usr/bin/env bash
# Install Mistral Vibe at the pinned version into its own virtual environment (idempotent, quiet
# when the right version is already there):
#   .vendor/vibe-venv/bin/vibe      headless CLI (`vibe -p ...`)
#   .vendor/vibe-venv/bin/vibe-acp  Agent Client Protocol server (what Octipus drives by default)
#
# Vibe needs Python >= 3.12 (protocols/observed.md §3.1: on 3.11 pip finds no usable version), so it
# cannot live in Octipus's own .venv. The interpreter is, in order: $OCTIPUS_VIBE_PYTHON; python3.13,
# python3.12 (and python3.14..python3.19) on PATH; ~/.pyenv/versions/3.1[2-9]*/bin/python3. Exit 2 with
# the list of what was searched when none is found.
set -euo pipefail
cd "$(dirname "$0")/.."

VIBE_VERSION="3.0.2"   # pinned: the version protocols/observed.md §3 was recorded with
venv=.vendor/vibe-venv

installed_version() {
  [ -x "$venv/bin/python" ] || return 1
  "$venv/bin/python" - <<'EOF' 2>/dev/null
from importlib.metadata import version
print(version("mistral-vibe"))
EOF
}

if [ "$(installed_version || true)" = "$VIBE_VERSION" ] && [ -x "$venv/bin/vibe" ] && [ -x "$venv/bin/vibe-acp" ]; then
  exit 0
fi

searched=()
py=""
usable() {  # usable CANDIDATE -> sets $py to the interpreter's real path when it is Python >= 3.12
  local candidate=$1
  searched+=("$candidate")
  "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1 || return 1
  py=$("$candidate" -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -n "$py" ]
}

find_python() {
  local candidate
  if [ -n "${OCTIPUS_VIBE_PYTHON:-}" ]; then
    usable "$OCTIPUS_VIBE_PYTHON" && return 0
  fi
  for candidate in python3.13 python3.12 python3.14 python3.15 python3.16 python3.17 python3.18 python3.19; do
    if command -v "$candidate" >/dev/null 2>&1; then
      usable "$candidate" && return 0
    else
      searched+=("$candidate (not on PATH)")
    fi
  done
  for candidate in "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    if [ -x "$candidate" ]; then
      usable "$candidate" && return 0
    else
      searched+=("$candidate (none)")
    fi
  done
  return 1
}

if ! find_python; then
  {
    echo "install-vibe: Mistral Vibe $VIBE_VERSION needs Python >= 3.12 and none was found."
    echo "Searched, in order (\$OCTIPUS_VIBE_PYTHON first, ${OCTIPUS_VIBE_PYTHON:-unset here}):"
    printf '  %s\n' "${searched[@]}"
    echo "Install Python 3.12 or newer, or set OCTIPUS_VIBE_PYTHON to its interpreter."
  } >&2
  exit 2
fi

if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
  rm -rf "$venv"   # a venv left by an older interpreter cannot hold Vibe
fi
mkdir -p .vendor
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -qq --disable-pip-version-check "mistral-vibe==$VIBE_VERSION"
got=$(installed_version || true)
if [ "$got" != "$VIBE_VERSION" ] || [ ! -x "$venv/bin/vibe-acp" ]; then
  echo "install-vibe: installed mistral-vibe is '${got:-missing}', expected $VIBE_VERSION (see pip output above)" >&2
  exit 1
fi
