"""Curriculum pretraining under DeepSpeed, one module per concern: `config` (the
curriculum and DeepSpeed configs), `setup` (profile, tokenizer, model), `data` (tokenized
sources, batches by token budget, truncation that keeps the label), `mining` (hardest
examples), `evaluation` (held-out loss and decoded accuracy while training), `export`
(Hugging Face exports, checkpoints), `plots`, and the one training loop: `loop` (the
stages in turn), `run` (what a process sets up before its first step), `stage_loop` (a
stage's steps, budget, logs, evaluations and checkpoints) and `distributed` (the process
group).

    python -m codeexecutor.training --curriculum curricula/demo.yaml --ds-config ds_configs/cpu.json
    deepspeed --module codeexecutor.training --curriculum curricula/recipes/paper.yaml \\
        --ds-config ds_configs/zero2_bf16.json
"""
