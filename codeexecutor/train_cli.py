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


def _tokenizer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curriculum", required=True, help="curriculum YAML whose sources the tokenizer learns from")
    p.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    p.add_argument("--out", required=True, metavar="DIR", help="the tokenizer's folder (set model.tokenizer to it)")
    p.add_argument("--sample", type=int, default=200_000, help="rows read at most, evenly from the distinct sources")


def _tokenizer_run(args: argparse.Namespace) -> int:
    from codeexecutor.errors import UsageError
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.tokenized import train_curriculum_tokenizer

    if args.sample < 1:
        raise UsageError("--sample must be >= 1")
    report = train_curriculum_tokenizer(Curriculum.load(args.curriculum, args.base_dir), args.base_dir, args.out, args.sample)
    print(f"tokenizer: {args.out} ({report['vocab_size']} tokens from {report['distinct_texts']} distinct texts)")
    return 0


def _tokenize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--curriculum", required=True, help="curriculum YAML whose sources to tokenize")
    p.add_argument("--base-dir", default=".", help="folder the curriculum's dataset paths are relative to")
    p.add_argument("--tokenizer", required=True, metavar="DIR", help="the tokenizer (codeexecutor tokenizer --out DIR)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder of the tokenized sources and their curriculum.yaml")
    p.add_argument("--workers", type=int, default=None, help="processes tokenizing (datasets.map num_proc)")


def _tokenize_run(args: argparse.Namespace) -> int:
    import os

    from codeexecutor.errors import UsageError
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.tokenized import tokenize_curriculum

    if not os.path.isfile(os.path.join(args.tokenizer, "tokenizer.json")):
        raise UsageError(f"no tokenizer at {args.tokenizer}: make one with codeexecutor tokenizer --out DIR")
    markers = tokenize_curriculum(Curriculum.load(args.curriculum, args.base_dir), args.base_dir, args.tokenizer, args.out,
                                  args.workers)
    for path, m in markers.items():
        print(f"{path}: {m['rows']} rows ({m['fits']})")
    print(f"curriculum: {os.path.join(args.out, 'curriculum.yaml')}")
    return 0


register("tokenizer", "train a curriculum's tokenizer in a step of its own, on a bounded sample", _tokenizer_args,
         _tokenizer_run)
register("tokenize", "tokenize a curriculum's sources once, for one tokenizer and format", _tokenize_args, _tokenize_run)
