#!/bin/sh
# Installs the peer benchmark's pinned AI SDK server packages
# (package-lock.json) into node_modules/ next to this script, as the
# stream conformance harness installs its own. Needs Node.js >= 20 and npm.
set -eu
cd "$(dirname "$0")"
exec npm ci --no-audit --no-fund --loglevel=error
