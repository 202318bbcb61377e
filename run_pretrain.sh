#!/usr/bin/env bash
# Data -> three-stage curriculum pretraining (docs/curriculum.md) with the deepspeed launcher.
#
# Everything is configured by environment variables; the defaults run the demo on CPU:
#   CURRICULUM     curriculum YAML                      (default: curricula/demo.yaml)
#   CODEEXECUTOR_ORDER  instead of CURRICULUM, DS_CONFIG and OUTPUT_DIR: a training order that
#                  `codeexecutor pretrain --launcher` wrote (codeexecutor/training/order.py)
#   DS_CONFIG      DeepSpeed JSON                       (default: chosen by the device, ds_configs/README.md:
#                                                        cpu.json without a GPU, zero2_bf16.json on compute
#                                                        capability 8.0 and up, zero2_fp16.json below it, a V100)
#   GPUS_PER_NODE  processes per node                   (default: number of GPUs, or 1 on CPU)
#   NNODES         nodes                                (default: 1)
#   LAUNCHER       deepspeed: DeepSpeed's runner (one node, or a HOSTFILE reached over ssh/pdsh);
#                  srun: inside a SLURM allocation, one torchrun a node started by srun, meeting at
#                  MASTER_ADDR (slurm/pretrain.sbatch)                    (default: deepspeed)
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
SHOWN="${DS_CONFIG:-}"
if [ -n "${CODEEXECUTOR_ORDER:-}" ]; then
  CURRICULUM="$CODEEXECUTOR_ORDER"
  SHOWN="the order's DeepSpeed config"
elif [ -z "${DS_CONFIG:-}" ] || [ "$DS_CONFIG" = auto ]; then  # by the device's compute capability: never emulated bf16
  DS_CONFIG=auto  # each process chooses (codeexecutor/training/precision.py) and logs it; shown here too
  SHOWN="$("$PYTHON" -m codeexecutor.training.precision) (auto)"
fi
GPUS_PER_NODE="${GPUS_PER_NODE:-$DEFAULT_PROCS}"
if [ "${LAUNCHER:-deepspeed}" = srun ]; then NNODES="${NNODES:-${SLURM_NNODES:-1}}"; else NNODES="${NNODES:-1}"; fi
MASTER_PORT="${MASTER_PORT:-29500}"

# The demo curriculum trains on datasets built from the repository's own demo inputs.
if [ "$CURRICULUM" = "curricula/demo.yaml" ] && [ ! -d demo_out/data/codenetmut/codenetmut ]; then
  echo "run_pretrain.sh: building the demo datasets first" >&2
  "$PYTHON" -m codeexecutor.demo --only data
fi

if [ -n "${CODEEXECUTOR_ORDER:-}" ]; then
  ARGS=(--order "$CODEEXECUTOR_ORDER")
else
  ARGS=(--curriculum "$CURRICULUM" --ds-config "$DS_CONFIG")
  [ -n "${OUTPUT_DIR:-}" ] && ARGS+=(--output-dir "$OUTPUT_DIR")
fi
LAUNCHER="${LAUNCHER:-deepspeed}"
if [ "$LAUNCHER" = srun ]; then
  # SLURM's own way to start a task on each node of the allocation; torchrun starts that node's
  # processes and they meet at the first node (c10d rendezvous), so no ssh and no hostfile.
  if [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "run_pretrain.sh: LAUNCHER=srun needs a SLURM allocation (sbatch slurm/pretrain.sbatch, or salloc)" >&2
    exit 2
  fi
  MASTER_ADDR="${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)}"
  echo "run_pretrain.sh: srun: $NNODES node(s) x $GPUS_PER_NODE process(es) meeting at $MASTER_ADDR:$MASTER_PORT," \
       "$CURRICULUM, $SHOWN" >&2
  # srun passes the job's CPUs on to its task (from Slurm 22.05 it no longer inherits --cpus-per-task)
  exec srun --nodes "$NNODES" --ntasks-per-node 1 --kill-on-bad-exit=1 ${SLURM_CPUS_PER_TASK:+--cpus-per-task "$SLURM_CPUS_PER_TASK"} \
    "$PYTHON" -m torch.distributed.run --nnodes "$NNODES" --nproc_per_node "$GPUS_PER_NODE" \
    --rdzv_id "$SLURM_JOB_ID" --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" \
    --module codeexecutor.training "${ARGS[@]}" "$@"
elif [ "$LAUNCHER" != deepspeed ]; then
  echo "run_pretrain.sh: LAUNCHER must be deepspeed or srun, got '$LAUNCHER'" >&2
  exit 2
fi

# The launcher as a module of the interpreter: no `deepspeed` script needs to be on PATH
# (wheels installed with --target, say, have none).
LAUNCH=("$PYTHON" -m deepspeed.launcher.runner --num_nodes "$NNODES" --num_gpus "$GPUS_PER_NODE" --master_port "$MASTER_PORT")
[ -n "${HOSTFILE:-}" ] && LAUNCH+=(--hostfile "$HOSTFILE")
[ -n "${MASTER_ADDR:-}" ] && LAUNCH+=(--master_addr "$MASTER_ADDR")

echo "run_pretrain.sh: $NNODES node(s) x $GPUS_PER_NODE process(es), gpu=$HAVE_GPU, $CURRICULUM, $SHOWN" >&2
exec "${LAUNCH[@]}" --module codeexecutor.training "${ARGS[@]}" "$@"
