#!/bin/sh
# Installs the OAuth tests' MCP server's pinned TypeScript MCP SDK (see
# package-lock.json) into node_modules/ next to this script. Needs Node.js
# >= 20 and npm.
set -eu
cd "$(dirname "$0")"
exec npm ci --no-audit --no-fund --loglevel=error
