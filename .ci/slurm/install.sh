#!/usr/bin/env bash
# Install the Debian packages of a one-node Slurm cluster (controller, node daemon, client
# commands, munge). ~10 s. Nothing is started here: start.sh does that, without systemd.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge
