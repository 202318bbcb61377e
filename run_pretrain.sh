#!/usr/bin/env bash
# Data -> three-stage curriculum pretraining (docs/curriculum.md) with the deepspeed launcher.
#
# Everything is configured by environment variables; the defaults run the demo on CPU:
#   CURRICULUM     curriculum YAML                      (default: curricula/demo.yaml)
#   DS_CONFIG      DeepSpeed JSON                       (default: chosen by the device, ds_configs/README.md:
#                                                        cpu.json without a GPU, zero2_bf16.json on compute
#                                                        capability 8.0 and up, zero2_fp16.json below it, a V100)
#   GPUS_PER_NODE  processes per node                   (default: number of GPUs, or 1 on CPU)
#   NNODES         nodes                                (default: 1)
#   HOSTFILE       deepspeed hostfile for multi-node    (default: none)
#   MASTER_ADDR    rendezvous address                   (default: set by the launcher)
#   MASTER_PORT    rendezvous port                      (default: 29500)
#   OUTPUT_DIR     overrides the curriculum's train.output_dir
#   PYTHON         interpreter with torch and deepspeed (default: .venv/bin/python where it exists, else
#                  python3 on PATH; `make venv` is run only when neither can import them)
# Extra arguments go to `python -m codeexecutor.training` (e.g. --max-steps 100).
# A killed run resumes from its latest checkpoint when started again with the same settings.
set -euo pipefail
cd "$(dirname "$0")"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's code, whichever interpreter runs it

if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON="$(command -v python3 || echo python3)"; fi
fi
if ! "$PYTHON" -c "import torch, deepspeed, yaml, datasets" 2>/dev/null; then
  echo "run_pretrain.sh: $PYTHON cannot import torch, deepspeed, yaml and datasets; creating the environment with 'make venv'" >&2
  make venv
  PYTHON=.venv/bin/python
fi
CURRICULUM="${CURRICULUM:-curricula/demo.yaml}"
if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  HAVE_GPU=1
  DEFAULT_PROCS="$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')"
else
  HAVE_GPU=0
  DEFAULT_PROCS=1
  export DS_ACCELERATOR=cpu
fi
if [ -z "${DS_CONFIG:-}" ] || [ "$DS_CONFIG" = auto ]; then  # by the device's compute capability: never emulated bf16
  DS_CONFIG="$("$PYTHON" -m codeexecutor.training.precision)"
fi
GPUS_PER_NODE="${GPUS_PER_NODE:-$DEFAULT_PROCS}"
NNODES="${NNODES:-1}"
MASTER_PORT="${MASTER_PORT:-29500}"

# The demo curriculum trains on datasets built from the repository's own demo inputs.
if [ "$CURRICULUM" = "curricula/demo.yaml" ] && [ ! -d demo_out/data/codenetmut/codenetmut ]; then
  echo "run_pretrain.sh: building the demo datasets first" >&2
  "$PYTHON" -m codeexecutor.demo --only data
fi

# The launcher as a module of the interpreter: no `deepspeed` script needs to be on PATH
# (wheels installed with --target, say, have none).
LAUNCH=("$PYTHON" -m deepspeed.launcher.runner --num_nodes "$NNODES" --num_gpus "$GPUS_PER_NODE" --master_port "$MASTER_PORT")
[ -n "${HOSTFILE:-}" ] && LAUNCH+=(--hostfile "$HOSTFILE")
[ -n "${MASTER_ADDR:-}" ] && LAUNCH+=(--master_addr "$MASTER_ADDR")
ARGS=(--curriculum "$CURRICULUM" --ds-config "$DS_CONFIG")
[ -n "${OUTPUT_DIR:-}" ] && ARGS+=(--output-dir "$OUTPUT_DIR")

echo "run_pretrain.sh: $NNODES node(s) x $GPUS_PER_NODE process(es), gpu=$HAVE_GPU, $CURRICULUM, $DS_CONFIG" >&2
exec "${LAUNCH[@]}" --module codeexecutor.training "${ARGS[@]}" "$@"
