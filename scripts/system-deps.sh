#!/usr/bin/env bash
# Installs the non-PyPI peers the test suite drives: kcat (librdkafka) and a Java runtime.
# Fails loudly when they are missing and cannot be installed: tests never skip a missing peer.
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing system packages: ${need[*]}; install them (apt-get install ${need[*]}) and re-run" >&2
  exit 1
fi
echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
