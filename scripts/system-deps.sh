#!/usr/bin/env bash
# Installs the non-PyPI peers the test suite drives: kcat (librdkafka), a Java runtime, and Go
# with Debian's sarama.
# Fails loudly when they are missing and cannot be installed: tests never skip a missing peer.
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
# Go, a C compiler (cgo: sarama's zstd) and Debian's sarama 1.22, for tests/broker/test_sarama.py
# (built offline in GOPATH mode from /usr/share/gocode: no Go module proxy needed).
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || need+=(golang-github-shopify-sarama-dev)
# npm, which installs the Node.js peers (scripts/node-peers.sh; Node 22 itself comes from npm).
command -v npm >/dev/null 2>&1 || need+=(npm)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing system packages: ${need[*]}; install them (apt-get install ${need[*]}) and re-run" >&2
  exit 1
fi
echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
