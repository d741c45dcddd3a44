#!/usr/bin/env bash
# System packages the test suite needs on a fresh machine (idempotent): Chromium for the HTML report tests,
# OpenSSH and LXC for the target and persistence tests, tmux/screen/at for the persistence probe, a docker engine
# for the docker:// target tests.
set -euo pipefail
pkgs=(chromium chromium-driver openssh-server openssh-client lxc busybox-static tmux screen at procps docker.io)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash tests/infra/provision.sh >/dev/null
