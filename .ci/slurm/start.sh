#!/usr/bin/env bash
# Start a one-node Slurm cluster on this machine, without systemd: our own munged (own key,
# own socket), slurmctld and slurmd, run as root in the foreground of background shells so
# their PIDs are known. Everything lives in STATE_DIR; `stop.sh STATE_DIR` stops what this
# started, by PID.
#
#   .ci/slurm/start.sh STATE_DIR [N_FAKE_GPUS]      (default 2 fake GPUs)
#   export SLURM_CONF=STATE_DIR/etc/slurm.conf      (then sinfo, sbatch, snakemake --profile ...)
#
# Ports: SLURM_CI_CTLD_PORT / SLURM_CI_SLURMD_PORT (default 6817 / 6818).
# Needs root and the Debian packages of install.sh. Outside STATE_DIR it touches one path:
# the link /run/slurm/conf -> STATE_DIR/etc, which stop.sh removes (see below).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 STATE_DIR [N_FAKE_GPUS]" >&2; exit 2; }
state="$(mkdir -p "$1" && cd "$1" && pwd)"
gpus="${2:-2}"
ctld_port="${SLURM_CI_CTLD_PORT:-6817}"
slurmd_port="${SLURM_CI_SLURMD_PORT:-6818}"

[ "$(id -u)" = 0 ] || { echo "start.sh: needs root (slurmd runs jobs as their user)" >&2; exit 1; }
for exe in munged munge unmunge slurmctld slurmd sinfo sbatch; do
    command -v "$exe" >/dev/null || { echo "start.sh: $exe not found: run .ci/slurm/install.sh" >&2; exit 1; }
done
# The link is another cluster's while one of the daemons its start.sh recorded still runs. A run
# killed before stop.sh (a timed-out CI job, a killed test) leaves a link whose daemons are gone:
# that one is stale and replaced. A real directory (a configless slurmd's cache) is never touched.
cluster_alive() {  # cluster_alive OTHER_STATE: a daemon of its pids file runs under its own name
    local name pid
    [ -f "$1/pids" ] || return 1
    while read -r name pid; do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] && return 0
    done < "$1/pids"
    return 1
}
if [ -L /run/slurm/conf ]; then
    other="$(readlink /run/slurm/conf)"
    if [ "$other" != "$state/etc" ]; then
        if cluster_alive "$(dirname "$other")"; then
            echo "start.sh: /run/slurm/conf belongs to a running cluster ($other): stop it first" >&2
            exit 1
        fi
        echo "start.sh: replacing a stale /run/slurm/conf -> $other (its daemons are gone)" >&2
    fi
elif [ -e /run/slurm/conf ]; then
    echo "start.sh: /run/slurm/conf is not a link of ours: is another cluster running here?" >&2
    exit 1
fi

# A fresh cluster every time: no jobs or node state recovered from an earlier run.
rm -rf "$state"/{etc,ctld,spool,log,munge}
mkdir -p "$state"/{etc,ctld,spool,log,munge}
chmod 711 "$state/munge"
: > "$state/pids"
export SLURM_CONF="$state/etc/slurm.conf"

# --- munge: a fresh key and a private socket --------------------------------------------------
key="$state/munge/munge.key"
dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
chmod 400 "$key"
sock="$state/munge/munge.socket"
munged --foreground --force --socket="$sock" --key-file="$key" --pid-file="$state/munge/munged.pid" \
    --seed-file="$state/munge/munged.seed" --log-file="$state/log/munged.log" > "$state/log/munged.out" 2>&1 &
echo "munged $!" >> "$state/pids"
for _ in $(seq 50); do munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1 && break; sleep 0.1; done
munge -n -S "$sock" | unmunge -S "$sock" >/dev/null || { echo "start.sh: munged did not answer" >&2; exit 1; }

# --- slurm.conf and gres.conf ----------------------------------------------------------------
host="$(hostname -s)"
node_line="$(slurmd -C | head -1)"          # NodeName=<host> CPUs=.. ... RealMemory=..
devices=(/dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty)
sed -e "s|@HOST@|$host|g" -e "s|@NODE@|$host|g" -e "s|@STATE@|$state|g" -e "s|@GPUS@|$gpus|g" \
    -e "s|@CTLD_PORT@|$ctld_port|g" -e "s|@SLURMD_PORT@|$slurmd_port|g" -e "s|@NODE_LINE@|$node_line|g" \
    "$here/slurm.conf.in" > "$SLURM_CONF"
[ "$gpus" -gt 0 ] || sed -i -e 's/ Gres=gpu:0//' "$SLURM_CONF"
{
    cat "$here/gres.conf.in"
    for ((i = 0; i < gpus; i++)); do echo "NodeName=$host Name=gpu File=${devices[$i]}"; done
} > "$state/etc/gres.conf"

# Client commands run inside jobs must find the config too, and the plugin's job step strips
# every SLURM_* variable (SLURM_CONF included) before its nested `srun`. Like on a real
# cluster, they then read /run/slurm/conf/slurm.conf (where a "configless" slurmd keeps its
# copy): link it to ours while the cluster runs.
mkdir -p /run/slurm
ln -sfn "$state/etc" /run/slurm/conf

# --- daemons, in the foreground (-D) of background shells: $! is the daemon's PID ------------
slurmctld -D -i -f "$SLURM_CONF" > "$state/log/slurmctld.out" 2>&1 &
echo "slurmctld $!" >> "$state/pids"
slurmd -D -f "$SLURM_CONF" > "$state/log/slurmd.out" 2>&1 &
echo "slurmd $!" >> "$state/pids"

for _ in $(seq 100); do
    [ "$(sinfo -h -N -o %t 2>/dev/null | head -1)" = idle ] && break
    sleep 0.3
done
if [ "$(sinfo -h -N -o %t 2>/dev/null | head -1)" != idle ]; then
    echo "start.sh: the node did not come up idle:" >&2
    sinfo -N -l >&2 || true
    tail -n 20 "$state"/log/* >&2 || true
    exit 1
fi
echo "one-node Slurm up: export SLURM_CONF=$SLURM_CONF"
sinfo
