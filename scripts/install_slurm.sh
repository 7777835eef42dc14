#!/usr/bin/env bash
# Debian's Slurm (slurmctld, slurmd, the client commands) and munge, for the Slurm tests
# (scripts/provision_slurm.sh installs the same itself). Idempotent: installs only what is
# missing. Needs root to install; without it, says so and exits 0 (the Slurm tests skip).
set -euo pipefail
. "$(dirname "$0")/lib/apt_install.sh"
if [ "$(id -u)" != 0 ] && ! { command -v slurmctld && command -v slurmd && command -v srun \
    && command -v munged; } >/dev/null 2>&1; then
  echo "install_slurm.sh: needs root (apt-get); the Slurm tests skip without it" >&2
  exit 0
fi
apt_install install_slurm.sh slurmctld command -v slurmctld
apt_install install_slurm.sh slurmd command -v slurmd
apt_install install_slurm.sh slurm-client command -v srun
apt_install install_slurm.sh munge command -v munged
echo "install_slurm: $(slurmctld -V) and munge installed"
