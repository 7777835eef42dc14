#!/usr/bin/env bash
# Debian's Slurm (slurmctld, slurmd, the client commands) and munge, for the Slurm tests
# (scripts/provision_slurm.sh). Idempotent: installs only what is missing. Needs root.
set -euo pipefail
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
   && command -v srun >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
  echo "install_slurm: $(slurmctld -V) and munge already installed"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install_slurm.sh: needs root (apt-get); the Slurm tests skip without it" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
echo "install_slurm: $(slurmctld -V) and munge installed"
