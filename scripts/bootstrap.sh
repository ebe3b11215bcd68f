#!/usr/bin/env bash
# Set up everything Octipus needs on a fresh machine (idempotent, quiet when all is present):
#   - .venv: Python >= 3.11 virtual environment with Octipus installed (editable) and its test tools;
#   - .vendor/npm: the real Claude Code and Codex CLIs at their pinned versions, from npm;
#   - .vendor/vibe-venv: Mistral Vibe at its pinned version, in its own Python >= 3.12 environment.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_VERSION="2.1.197"   # pinned: the version protocols/observed.md was recorded with

find_python() {
  for candidate in "${OCTIPUS_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

stamp=.venv/.octipus-installed
if [ ! -x .venv/bin/python ] || [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  py=$(find_python) || { echo "bootstrap: Python >= 3.11 is required (set OCTIPUS_PYTHON to one)" >&2; exit 2; }
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
  touch "$stamp"
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "bootstrap: npm not found; installing Node.js from Debian packages" >&2
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi
claude=.vendor/npm/node_modules/.bin/claude
if [ ! -x "$claude" ] || ! "$claude" --version 2>/dev/null | grep -q "^$CLAUDE_VERSION"; then
  mkdir -p .vendor/npm
  npm install --silent --no-audit --no-fund --prefix .vendor/npm "@anthropic-ai/claude-code@$CLAUDE_VERSION"
  "$claude" --version >/dev/null
fi

# The other vendor CLIs the tests drive, each at its pinned version.
bash scripts/install-codex.sh
bash scripts/install-vibe.sh
