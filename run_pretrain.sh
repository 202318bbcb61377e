#!/usr/bin/env bash
# Three-stage curriculum pretraining (SPEC §5-6) under the deepspeed launcher.
# Not implemented yet: the model and training loop land with the pretraining issue.
set -euo pipefail
echo "run_pretrain.sh: pretraining is not implemented yet (model + DeepSpeed loop are the next milestone)." >&2
exit 3
