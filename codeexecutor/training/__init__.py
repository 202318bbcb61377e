"""Curriculum pretraining under DeepSpeed, one module per concern: `config` (the
curriculum and DeepSpeed configs), `setup` (profile, tokenizer, model), `data` (tokenized
sources, batches by token budget, truncation that keeps the label), `mining` (hardest
examples), `evaluation` (held-out loss and decoded accuracy while training), `export`
(Hugging Face exports, checkpoints), `plots`, and `loop` (the one training loop).

    python -m codeexecutor.training --curriculum curricula/demo.yaml --ds-config ds_configs/cpu.json
    deepspeed --module codeexecutor.training --curriculum curricula/recipes/paper.yaml --ds-config ds_configs/zero2_bf16.json
"""
