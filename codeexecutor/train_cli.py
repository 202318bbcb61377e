"""`codeexecutor pretrain`: the curriculum in this process (no launcher); for several
processes or nodes use run_pretrain.sh, which starts the same loop with the deepspeed launcher."""

from __future__ import annotations

import argparse

from codeexecutor.cli import register


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curriculum", default="curricula/demo.yaml", help="curriculum YAML (default curricula/demo.yaml)")
    p.add_argument("--ds-config", default="ds_configs/cpu.json", help="DeepSpeed JSON (default ds_configs/cpu.json)")
    p.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    p.add_argument("--output-dir", help="override train.output_dir")
    p.add_argument("--max-steps", type=int, help="stop after this global step (resume later with the same command)")


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.training.loop import train

    final = train(args.curriculum, args.ds_config, args.base_dir, args.output_dir, args.max_steps)
    print(final)
    return 0


register("pretrain", "run the three-stage curriculum pretraining (single process; run_pretrain.sh for the launcher)", _args, _run)
