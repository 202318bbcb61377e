#!/usr/bin/env bash
# Training and generation measured on one GPU machine, including one that has no package
# registry and no copy of ../shared/data.
#
#   on a connected machine:  .venv/bin/python benchmarks/campaign_pack.py   # .campaign/: wheels + corpora (< 64 MiB)
#   copy the checkout with .campaign/ to the GPU machine, then there:
#     bash benchmarks/gpu_campaign.sh check                 # inputs and plan, nothing trained (also runs in CI)
#     bash benchmarks/gpu_campaign.sh benches               # about 10 minutes
#     bash benchmarks/gpu_campaign.sh quality 4 small [delta]    # bench_quality with a 4-minute training budget
#   and copy $OUT's files into benchmarks/results/. A lent GPU gives a session 15 minutes in
#   calls of at most 10, so a quality run's build, training and scoring must fit one call:
#   the compact/full pair is two calls of `quality 4 small delta|full`.
#
# benches: bench_train's accelerator section (base in bf16: token-budget vs fixed batches,
#   SDPA vs eager, real tokens/s, peak memory, MFU), a short fp16 run through
#   ds_configs/zero2_fp16.json logging the dynamic loss scale and the skipped steps, and
#   bench_generate at beam 10 (cached + batched vs one-at-a-time recomputation).
# quality MINUTES PRESET [STATE]: bench_quality.py with that training budget on a quick
#   build, trace states full (default) or delta (docs/trace-format.md).
#
# Everything it writes for the caller goes to $OUT (default runs/campaign/out).
# CAMPAIGN_SMOKE=1 runs the same steps on the CPU at toy sizes (tests/test_campaign.py).
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:-benches}
case "$part" in
  check|benches|quality) ;;
  *) echo "gpu_campaign: unknown part '$part' (check, benches, or quality MINUTES [PRESET] [STATE])" >&2; exit 2 ;;
esac
OUT=${OUT:-$PWD/runs/campaign/out}
WORK=${CAMPAIGN_WORK:-$PWD/runs/campaign}
PY=${PYTHON:-python3}
SMOKE=${CAMPAIGN_SMOKE:-0}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 CODEEXECUTOR_RESULTS="$OUT" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
log() { echo "[campaign $(date +%H:%M:%S)] $*"; }

if [ "$SMOKE" != 1 ] && compgen -G ".campaign/whl/*.whl" >/dev/null; then
  log "installing $(ls .campaign/whl | wc -l) carried wheels"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .campaign/whl/*.whl \
    || { echo "gpu_campaign: installing the carried wheels failed" >&2; exit 2; }
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
if [ "$SMOKE" = 1 ]; then
  device=cpu preset=tiny accel_steps=2 corpora=(curricula/demo) tutorial=curricula/demo/tutorial limit="" functions=()
else
  device=cuda preset=base accel_steps=30 tutorial="$WORK/corpora/python-tutorial/tutorial_rst" limit="--codenet-limit 1500"
  corpora=("$WORK/corpora/atcoder-python" "$WORK/corpora/atcoder-python-2")
  functions=("$WORK/corpora/thealgorithms-python" "$WORK/corpora/keon-algorithms")  # the recipe's functions set
  if [ ! -d "$WORK/corpora" ]; then
    [ -f .campaign/corpora.tar.xz ] || { echo "gpu_campaign: no .campaign/corpora.tar.xz; run benchmarks/campaign_pack.py here and carry .campaign" >&2; exit 2; }
    mkdir -p "$WORK/corpora" && tar -xJf .campaign/corpora.tar.xz -C "$WORK/corpora"
  fi
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv > "$OUT/gpu.csv" 2>&1
fi
$PY -c "import torch, transformers, deepspeed, datasets, tree_sitter; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'deepspeed', deepspeed.__version__)" 2>&1 | grep -v WARNING | tee "$OUT/versions.txt"

if [ "$part" = check ]; then
  $PY -c "import sys; sys.path.insert(0, 'benchmarks'); import bench_quality; r = bench_quality.load_recipe(); print('recipe', bench_quality.RECIPE.name, [s['name'] for s in r['stages']])" \
    || { echo "gpu_campaign: the recipe does not load" >&2; exit 2; }
  for c in "${corpora[@]}" "$tutorial" "${functions[@]}"; do [ -d "$c" ] || { echo "gpu_campaign: missing input $c" >&2; exit 2; }; done
  log "plan on $device ($preset): build from ${corpora[*]}; benches: bench_train --accelerator-preset $preset, fp16 ZeRO-2 run, bench_generate; quality MINUTES PRESET [STATE]: bench_quality.py"
  log "check passed; nothing trained"
  exit 0
fi

data="$WORK/data"
log "datasets"
$PY benchmarks/bench_quality.py --budget-minutes 1 --build-only --data "$data" --corpora "${corpora[@]}" \
  --tutorial-sources "$tutorial" $limit --mutants 4 --function-corpora "${functions[@]}" > "$OUT/build.log" 2>&1 \
  || { tail -20 "$OUT/build.log"; exit 1; }

status=0
if [ "$part" = benches ]; then
  log "bench_train: $preset, accelerator section on $device"
  timeout 240 $PY benchmarks/bench_train.py --only-accelerator --data "$data" --device "$device" --accelerator-preset "$preset" \
    --accelerator-steps "$accel_steps" || status=1

  log "fp16 through ds_configs/zero2_fp16.json"
  fp16="$WORK/fp16"
  rm -rf "$fp16" && mkdir -p "$fp16"
  $PY - "$data" "$fp16" "$preset" "$SMOKE" <<'EOF' || status=1
import sys, yaml
sys.path.insert(0, "benchmarks")
from bench_quality import curriculum, load_recipe
data, out, preset, smoke = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
cur = curriculum(load_recipe(), data, out + "/run", {"singleline": 4 if smoke else 60, "tutorial": 1, "codenet": 1}, 8, None,
                 {"preset": preset}, {"max_tokens": 6144, "log_every": 1, "eval_examples": 0})
cur["stages"][0]["lr"] = 1e-4
yaml.safe_dump(cur, open(out + "/curriculum.yaml", "w"))
EOF
  if [ "$SMOKE" = 1 ]; then ds=ds_configs/cpu.json; steps=4; else ds=ds_configs/zero2_fp16.json; steps=60; fi
  timeout 240 $PY -m codeexecutor.training --curriculum "$fp16/curriculum.yaml" --ds-config "$ds" --max-steps "$steps" \
    > "$OUT/fp16_run.log" 2>&1 || { tail -20 "$OUT/fp16_run.log"; status=1; }
  cp "$fp16/run/train_log.jsonl" "$OUT/fp16_zero2_train_log.jsonl" 2>/dev/null

  log "bench_generate at beam 10"
  if [ "$SMOKE" = 1 ]; then gen=(--programs 2 --max-length 8 --preset tiny); else gen=(--programs 32 --max-length 256 --preset small); fi
  timeout 180 $PY benchmarks/bench_generate.py --beam 10 --device "$device" "${gen[@]}" || status=1
elif [ "$part" = quality ]; then
  minutes=${2:-5}
  log "bench_quality: ${3:-small}, $minutes minutes"
  $PY benchmarks/bench_quality.py --budget-minutes "$minutes" --preset "${3:-small}" --state "${4:-full}" --data "$data" --run "$WORK/quality/run" \
    --eval-limit "$([ "$SMOKE" = 1 ] && echo 4 || echo 300)" --valid-examples "$([ "$SMOKE" = 1 ] && echo 0 || echo 48)" --corpora "${corpora[@]}" --tutorial-sources "$tutorial" \
    --function-corpora "${functions[@]}" || status=1
  cp "$WORK/quality/bench_quality.log" "$OUT/" 2>/dev/null
else
  echo "gpu_campaign: unknown part '$part' (check, benches, or quality MINUTES [PRESET] [STATE])" >&2
  exit 2
fi
log "done (status $status); files in $OUT:"
ls -la "$OUT"
exit $status
