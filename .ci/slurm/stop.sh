#!/usr/bin/env bash
# Stop the one-node cluster that start.sh STATE_DIR started: cancel its jobs, then stop each
# daemon by the PID start.sh recorded (TERM, then KILL after 10 s), and remove its
# /run/slurm/conf link. Nothing else is touched.
#   .ci/slurm/stop.sh STATE_DIR
set -uo pipefail
state="$(cd "$1" && pwd)" || exit 0
[ -f "$state/pids" ] || exit 0
export SLURM_CONF="$state/etc/slurm.conf"

if grep -q '^slurmctld ' "$state/pids"; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null
    for _ in $(seq 20); do [ -z "$(squeue -h -t R,CG,PD 2>/dev/null)" ] && break; sleep 0.5; done
fi

# slurmd first, then the controller, munged last (the others authenticate through it).
for name in slurmd slurmctld munged; do
    pid="$(awk -v n="$name" '$1 == n { print $2 }' "$state/pids")"
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "stop.sh: $name ($pid) ignored TERM; killing it" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
done
# The link start.sh made for client commands inside jobs, if it is still ours.
[ "$(readlink /run/slurm/conf 2>/dev/null)" = "$state/etc" ] && rm -f /run/slurm/conf
rm -f "$state/pids"
