#!/bin/sh
# Installs the OAuth tests' pinned authorization server (oidc-provider, see
# package-lock.json) into node_modules/ next to this script. Needs Node.js
# >= 20 and npm.
set -eu
cd "$(dirname "$0")"
exec npm ci --no-audit --no-fund --loglevel=error
