#!/usr/bin/env bash
# A lease of a lent GPU (docs/gpu-run.md): the committed GPU model continued, exported and
# scored in one call (lease.py); the second call measures (measure.py).
#
#   here:          .venv/bin/python gpu_run/wheels.py      # .campaign/whl: what the device's image lacks
#                  bash gpu_run/run.sh --plan              # ready or not, the room, the seconds
#   on the GPU:    bash gpu_run/run.sh                     # carry .campaign/whl with the call
#                  bash gpu_run/run.sh --measure           # a second call: throughput, GPU tests, DeepSpeed
#   back here:     .venv/bin/python gpu_run/land.py DIR --commit
#
# --smoke runs the lease on the CPU at toy sizes (tests/test_gpu_run.py).
set -uo pipefail
START=$(date +%s)  # the call's seconds count from here: the wheels' install is part of them
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
case "${1:-}" in
  ""|--smoke|--measure|--plan) ;;
  *) echo "gpu_run: usage: gpu_run/run.sh [--plan|--measure|--smoke]" >&2; exit 2 ;;
esac
export PYTHONUNBUFFERED=1
if [ "${1:-}" = --plan ] || [ "${1:-}" = --smoke ]; then  # here: the checkout's environment where it has one
  [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && PY=.venv/bin/python
  [ "${1:-}" = --plan ] && exec $PY gpu_run/wheels.py --plan
  exec $PY gpu_run/lease.py --smoke
fi
if compgen -G ".campaign/whl/*.whl" >/dev/null; then
  echo "[gpu_run] installing $(ls .campaign/whl | wc -l) carried wheels"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .campaign/whl/*.whl \
    || { echo "gpu_run: installing the carried wheels failed: make them again (gpu_run/wheels.py)" >&2; exit 2; }
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
[ "${1:-}" = --measure ] && exec $PY gpu_run/measure.py
exec $PY gpu_run/lease.py --started "$START"
