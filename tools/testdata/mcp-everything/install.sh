#!/bin/sh
# Installs the pinned MCP server-everything (package-lock.json) into
# node_modules/ next to this script. Needs Node.js >= 20 and npm.
set -eu
cd "$(dirname "$0")"
exec npm ci --no-audit --no-fund --loglevel=error
