#!/usr/bin/env bash
# First real numbers (issue 3, point 6): cot / chain / tree on MetaQA dev (answerable
# subset) and PathQuestion with the default local model. Sample sizes are set by
# environment variables so the same script serves a quick look and the full 100-question
# runs: N_COT, N_CHAIN, N_TREE (default 100 each); COT_SETS, CHAIN_SETS, TREE_SETS pick the
# datasets (default all six; empty skips). CHAIN_FLAGS are extra flags for the chain runs
# (default --calibrate, as the published chain numbers were run); TREE_FLAGS the same for
# tree (default --calibrate too, so tree vs chain compares the search, not the decoding).
# Runs are resumable.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared/data}
OUT=${OUT:-runs/paper}
N_COT=${N_COT:-100}; N_CHAIN=${N_CHAIN:-100}; N_TREE=${N_TREE:-100}
ALL="metaqa-1hop metaqa-2hop metaqa-3hop pq-2h pq-3h pql-2h"
COT_SETS=${COT_SETS-$ALL}; CHAIN_SETS=${CHAIN_SETS-$ALL}; TREE_SETS=${TREE_SETS-$ALL}
T=.venv/bin/traversals

run() { # dataset strategy n extra...
  local ds=$1 st=$2 n=$3; shift 3
  local data=$SHARED/metaqa flags=(--split dev --answerable-only)
  case $ds in pq-*|pql-*) data=$SHARED/pathquestion; flags=();; esac
  local depth=()
  # tree and chain only: cot has no search depth (eval refuses the flag there)
  if [ "$st" != cot ] && { [ "$ds" = metaqa-3hop ] || [ "$ds" = pq-3h ]; }; then depth=(--max-depth 12); fi
  local resume=(); [ -s "$OUT/$ds-$st/results.jsonl" ] && resume=(--resume)
  $T eval "$ds" --data "$data" "${flags[@]}" --limit "$n" --strategy "$st" "${depth[@]}" \
     --out "$OUT/$ds-$st" --no-progress "${resume[@]}" "$@"
}

for ds in $COT_SETS; do run "$ds" cot "$N_COT"; done
CHAIN_FLAGS=${CHAIN_FLAGS---calibrate}
for ds in $CHAIN_SETS; do run "$ds" chain "$N_CHAIN" $CHAIN_FLAGS; done
TREE_FLAGS=${TREE_FLAGS---calibrate}
for ds in $TREE_SETS; do run "$ds" tree "$N_TREE" $TREE_FLAGS; done
$T report "$OUT"/*/ --out "$OUT/report.md"
