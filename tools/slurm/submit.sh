#!/usr/bin/env bash
# Submits the map (a job array of memsnap summarize) and the reduce
# (memsnap ranks, after every array task succeeded) for one run's snapshots.
#
#   tools/slurm/submit.sh SNAPSHOT_DIR SUMMARY_DIR [TASKS] [-- SBATCH_FLAGS...]
#
# TASKS: array tasks (default: one per 16 files, at most 1024). The reduce
# writes SUMMARY_DIR/ranks.json. Prints the two job ids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ $# -lt 2 ]; then
  echo "usage: submit.sh SNAPSHOT_DIR SUMMARY_DIR [TASKS] [-- SBATCH_FLAGS...]" >&2
  exit 2
fi
snapshots=$1
summaries=$2
shift 2
tasks=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  tasks=$1
  shift
fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
files=$(find "$snapshots" -maxdepth 1 -type f \( -name '*.pickle' -o -name '*.pkl' -o -name '*.pt' \
  -o -name '*.pickle.gz' -o -name '*.pkl.gz' -o -name '*.pickle.zst' -o -name '*.pkl.zst' \) | wc -l)
if [ "$files" -eq 0 ]; then
  echo "submit.sh: no snapshot in $snapshots" >&2
  exit 1
fi
if [ -z "$tasks" ]; then
  tasks=$(( (files + 15) / 16 ))
  if [ "$tasks" -gt 1024 ]; then tasks=1024; fi
fi
mkdir -p "$summaries"
map=$(sbatch --parsable --array=0-$((tasks - 1)) "$@" "$here/memsnap-summarize.sbatch" "$snapshots" "$summaries")
map=${map%%;*}
reduce=$(sbatch --parsable --dependency=afterok:"$map" "$@" "$here/memsnap-ranks.sbatch" "$summaries" "$summaries/ranks.json")
reduce=${reduce%%;*}
echo "map: job array $map ($tasks tasks over $files files); reduce: job $reduce -> $summaries/ranks.json"
