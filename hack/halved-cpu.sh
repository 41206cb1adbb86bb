#!/usr/bin/env bash
# Run a command on half of this machine's CPUs, every process it starts included: the
# test processes, the dev cluster's control plane, node agents and pods (a cpuset is
# inherited on fork, and the dev cluster moves pods only within the cpu controller).
# Checks that the default test tier does not depend on the machine's speed:
#   bash hack/halved-cpu.sh env CI=true bash .ci/run
# Needs root and a cpuset controller (cgroup v1 `cpuset`, or v2 with cpuset enabled).
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

total=$(nproc --all)
half=$(( total / 2 > 0 ? total / 2 : 1 ))
cpus="0-$(( half - 1 ))"

if [ -d /sys/fs/cgroup/cpuset ] && [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
  root=/sys/fs/cgroup/cpuset
  group="$root/cascade-halved-$$"
  mkdir "$group"
  cat "$root/cpuset.mems" > "$group/cpuset.mems"
  echo "$cpus" > "$group/cpuset.cpus"
  procs=tasks
elif grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  root=/sys/fs/cgroup
  group="$root/cascade-halved-$$"
  grep -qw cpuset "$root/cgroup.subtree_control" || echo +cpuset > "$root/cgroup.subtree_control"
  mkdir "$group"
  echo "$cpus" > "$group/cpuset.cpus"
  procs=cgroup.procs
else
  echo "$0: no cpuset controller on this machine (cgroup v1 cpuset or v2 with cpuset)" >&2
  exit 1
fi
echo $$ > "$group/$procs"
echo "running on CPUs $cpus of $total ($(nproc) visible): $*" >&2
"$@" && rc=0 || rc=$?
# Leave the group, then remove it (refused while a process started in it still runs).
echo $$ > "$root/$procs"
rmdir "$group" 2>/dev/null || echo "$0: $group still holds processes; left in place" >&2
exit "$rc"
