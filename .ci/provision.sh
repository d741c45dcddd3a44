#!/usr/bin/env bash
# System packages the test suite needs on a fresh machine (idempotent): Chromium for the HTML report tests,
# OpenSSH and LXC for the target and persistence tests, tmux/screen/at for the persistence probe, a docker engine
# for the docker:// target tests, and a single-node Slurm (with slurmdbd + MariaDB for sacct) for the Slurm tests.
set -euo pipefail
pkgs=(chromium chromium-driver openssh-server openssh-client lxc busybox-static tmux screen at procps
      slurmctld slurmd slurm-client slurmdbd munge mariadb-server iproute2 nftables)  # ip, nft: the pair's networks
optional=(docker.io)  # without it only the docker:// tests skip (provision.sh records why)
missing() { for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"; done; }
export DEBIAN_FRONTEND=noninteractive
need=($(missing "${pkgs[@]}"))
want=($(missing "${optional[@]}"))
if ((${#need[@]} + ${#want[@]})); then
  apt-get update -qq
fi
if ((${#need[@]})); then
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ((${#want[@]})); then
  apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null || echo "WARNING: could not install ${want[*]}" >&2
fi
bash tests/infra/provision.sh >/dev/null
bash tests/infra/slurm.sh >/dev/null
# the two-node cluster on this host, for check --slurm-nodes 2; where it cannot start, its tests fail with the reason
bash tests/infra/slurm_pair.sh >/dev/null || echo "WARNING: the two-node Slurm did not start (tests/test_slurm_nodes.py will say why)" >&2
