#!/usr/bin/env bash
# Data -> three-stage curriculum pretraining (docs/curriculum.md) with the deepspeed launcher.
#
# Everything is configured by environment variables; the defaults run the demo on CPU:
#   CURRICULUM     curriculum YAML                      (default: curricula/demo.yaml)
#   DS_CONFIG      DeepSpeed JSON                       (default: ds_configs/cpu.json without a GPU,
#                                                        ds_configs/zero2_bf16.json with one)
#   GPUS_PER_NODE  processes per node                   (default: number of GPUs, or 1 on CPU)
#   NNODES         nodes                                (default: 1)
#   HOSTFILE       deepspeed hostfile for multi-node    (default: none)
#   MASTER_ADDR    rendezvous address                   (default: set by the launcher)
#   MASTER_PORT    rendezvous port                      (default: 29500)
#   OUTPUT_DIR     overrides the curriculum's train.output_dir
#   PYTHON         interpreter with the project installed (default: .venv/bin/python; `make venv` makes it)
# Extra arguments go to `python -m codeexecutor.training` (e.g. --max-steps 100).
# A killed run resumes from its latest checkpoint when started again with the same settings.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-.venv/bin/python}"
if [ ! -x "$PYTHON" ]; then
  echo "run_pretrain.sh: $PYTHON not found; creating the environment with 'make venv'" >&2
  make venv
fi
BIN="$(dirname "$PYTHON")"
CURRICULUM="${CURRICULUM:-curricula/demo.yaml}"
if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  HAVE_GPU=1
  DEFAULT_PROCS="$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')"
  DS_CONFIG="${DS_CONFIG:-ds_configs/zero2_bf16.json}"
else
  HAVE_GPU=0
  DEFAULT_PROCS=1
  DS_CONFIG="${DS_CONFIG:-ds_configs/cpu.json}"
  export DS_ACCELERATOR=cpu
fi
GPUS_PER_NODE="${GPUS_PER_NODE:-$DEFAULT_PROCS}"
NNODES="${NNODES:-1}"
MASTER_PORT="${MASTER_PORT:-29500}"

# The demo curriculum trains on datasets built from the repository's own demo inputs.
if [ "$CURRICULUM" = "curricula/demo.yaml" ] && [ ! -d demo_out/data/codenetmut/codenetmut ]; then
  echo "run_pretrain.sh: building the demo datasets first" >&2
  "$PYTHON" -m codeexecutor.demo --only data
fi

LAUNCH=("$BIN/deepspeed" --num_nodes "$NNODES" --num_gpus "$GPUS_PER_NODE" --master_port "$MASTER_PORT")
[ -n "${HOSTFILE:-}" ] && LAUNCH+=(--hostfile "$HOSTFILE")
[ -n "${MASTER_ADDR:-}" ] && LAUNCH+=(--master_addr "$MASTER_ADDR")
ARGS=(--curriculum "$CURRICULUM" --ds-config "$DS_CONFIG")
[ -n "${OUTPUT_DIR:-}" ] && ARGS+=(--output-dir "$OUTPUT_DIR")

echo "run_pretrain.sh: $NNODES node(s) x $GPUS_PER_NODE process(es), gpu=$HAVE_GPU, $CURRICULUM, $DS_CONFIG" >&2
exec "${LAUNCH[@]}" --module codeexecutor.training "${ARGS[@]}" "$@"
