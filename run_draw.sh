#!/usr/bin/env bash
# One GPU draw (codeexecutor/campaign/draw.py): checks, throughput, a trained model and its
# scores in at most 540 s of steps, each step's file in $OUT as it finishes.
#
#   here:            .venv/bin/codeexecutor draw pack           # .campaign/: curriculum, test samples, wheels
#   on the GPU:      bash run_draw.sh                           # carry .campaign with the call
#                    bash run_draw.sh --plan                    # here: ready or not, the room left, the steps, the data
#                    bash run_draw.sh --deepspeed               # there, after the draw: ZeRO-2 fp16 to 200 steps through
#                                                               # run_pretrain.sh, overlap_comm's cost (270 s and the install)
#   back here:       .venv/bin/codeexecutor draw unpack DIR     # join, load, score again on the CPU
#
# CAMPAIGN_SMOKE=1 runs the same steps on the CPU at toy sizes (tests/test_campaign.py).
set -uo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
case "${1:-}" in
  ""|--plan|--deepspeed) ;;
  *) echo "run_draw: usage: run_draw.sh [--plan|--deepspeed]" >&2; exit 2 ;;
esac
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PACK=${CAMPAIGN_PACK:-$PWD/.campaign}
if [ "${1:-}" = --plan ]; then  # here, before any wheel: the checkout's environment where it has one
  [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && PY=.venv/bin/python
  exec $PY -m codeexecutor draw plan --pack "$PACK"
fi
if [ "${CAMPAIGN_SMOKE:-0}" != 1 ] && compgen -G "$PACK/whl/*.whl" >/dev/null; then
  echo "[draw] installing $(ls "$PACK"/whl | wc -l) carried wheels"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$PACK"/whl/*.whl \
    || { echo "run_draw: installing the carried wheels failed: pack them again (codeexecutor draw pack)" >&2; exit 2; }
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
[ "${1:-}" = --deepspeed ] && exec $PY -m codeexecutor draw deepspeed
exec $PY -m codeexecutor draw run
