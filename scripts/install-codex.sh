#!/usr/bin/env bash
# Install the pinned OpenAI Codex CLI into .vendor/npm (same npm prefix as Claude Code).
# Idempotent and quiet when the right version is already there (`codex --version`).
#   protocols/observed.md §2 and observed-2.md §1 were recorded with this version.
set -euo pipefail
cd "$(dirname "$0")/.."

CODEX_VERSION="0.171.0"   # pinned: the version protocols/observed.md was recorded with

codex=.vendor/npm/node_modules/.bin/codex
installed() {
  [ -x "$codex" ] && "$codex" --version 2>/dev/null | grep -q "^codex-cli $CODEX_VERSION\$"
}
if ! installed; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-codex: npm not found; install Node.js (scripts/bootstrap.sh does)" >&2
    exit 2
  fi
  mkdir -p .vendor/npm
  npm install --silent --no-audit --no-fund --save-exact --prefix .vendor/npm "@openai/codex@$CODEX_VERSION"
  if ! installed; then
    echo "install-codex: $codex does not report codex-cli $CODEX_VERSION after install:" >&2
    "$codex" --version >&2 || true
    exit 1
  fi
fi
