#!/usr/bin/env bash
# Submit the CodeNetMut build: the array of shard builds, then the merge, which starts once
# every task has ended well (afterok). Arguments go to the array's sbatch (--array=0-31, ...).
#   CODENET=/data/Project_CodeNet bash slurm/build.sh --array=0-15
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CODENET:?set CODENET to the Project CodeNet root(s)}"
array=$(sbatch --parsable --export=ALL "$@" slurm/build.sbatch)
merge=$(sbatch --parsable --export=ALL --dependency="afterok:${array%%;*}" slurm/merge.sbatch)
echo "build array $array, merge $merge (after every task ends well)"
