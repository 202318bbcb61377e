"""`codeexecutor draw pack|plan|run|deepspeed|unpack` and `codeexecutor ship`: a GPU draw from its pack
to a shipped model (docs/gpu-draw.md).

    codeexecutor draw pack [--recipe R] [--data DIR]   # here: build, tokenize and pack (.campaign/)
    bash run_draw.sh                                    # there: the draw (`draw run` after the wheels)
    bash run_draw.sh --deepspeed                        # there, after it: fp16 and overlap_comm (`draw deepspeed`)
    codeexecutor draw unpack DIR [--install models/N]  # here: join, load and score what came back
"""

from __future__ import annotations

import argparse
import pathlib


def _draw_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pk = sub.add_parser(
        "pack", help="build (where missing), tokenize and pack a recipe's data for a draw into .campaign/"
    )
    pk.add_argument(
        "--recipe", help="the draw's recipe (default curricula/recipes/gpu-draw.yaml; curricula/demo.yaml with --smoke)"
    )
    pk.add_argument(
        "--data",
        help="built datasets to pack instead of the recipe's data.dir (each source found as BUILD/NAME under it)",
    )
    pk.add_argument(
        "--prep",
        help="folder of the pretrain phases that prepare the data (default runs/draw-prep): "
        "resumable, kept between packs",
    )
    pk.add_argument("--out", help="the pack's folder (default .campaign)")
    pk.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="change one field of the recipe (data.dir=runs/x); repeatable",
    )
    pk.add_argument("--smoke", action="store_true", help="the demo recipe, no wheels: the CPU smoke run's pack")
    pk.add_argument("--no-wheels", action="store_true", help="carry no wheels (a device that has every package)")
    pk.add_argument("--workers", type=int, help="processes compressing the sources (default: every core)")
    pk.add_argument(
        "--assume-python",
        metavar="X.Y",
        help="the interpreter that traced a build made before builds recorded it (their stats.json has no `python`)",
    )
    pk.add_argument(
        "--build",
        action="store_true",
        help="build, tokenize and pack the recipe's data here (hours) "
        "instead of packing the committed data (curricula/packed)",
    )
    ad = sub.add_parser("add", help="add a prep's tokenized sources to the committed data (curricula/packed) as a part")
    ad.add_argument(
        "--prep", required=True, help="a folder where `pretrain --until tokenize` finished (e.g. runs/draw-prep)"
    )
    ad.add_argument(
        "--part", required=True, help="the part's name, e.g. s0of4 for the builds' --shard 0/4 (letters, digits, -)"
    )
    rw = sub.add_parser(
        "rows", help="the committed data back as readable JSON lines (code, trace, fit), a file a source"
    )
    rw.add_argument("--out", required=True, help="folder for SOURCE.jsonl")
    rw.add_argument("--source", action="append", dest="sources", metavar="NAME", help="only this source (repeatable)")
    rw.add_argument("--limit", type=int, help="at most this many rows a source")
    pl = sub.add_parser("plan", help="the draw's steps and time limits, and the tokens the pack carries")
    pl.add_argument("--pack", help="the pack (default .campaign, or CAMPAIGN_PACK)")
    pl.add_argument(
        "--device",
        help="plan at the speed last measured on this device (e.g. H100, H200; default: the last draw's device)",
    )
    sub.add_parser("run", help="the draw itself, on the lent GPU machine (run_draw.sh installs the wheels first)")
    sub.add_parser(
        "deepspeed",
        help="a second call after the draw: run_pretrain.sh in ZeRO-2 fp16 to 200 steps (its loss scale) and "
        "overlap_comm's cost on one GPU (run_draw.sh --deepspeed)",
    )
    from codeexecutor.campaign import unpack

    unpack.add_arguments(
        sub.add_parser("unpack", help="join, load and score again on this machine what a draw brought back")
    )


def _draw_run(args: argparse.Namespace) -> int:
    if args.action == "pack":
        from codeexecutor.campaign.pack import PACK, Prep, pack, summary

        prep = Prep(args.prep, args.data, args.assume_python, args.workers)
        manifest = pack(args.recipe, args.out, args.overrides, args.smoke, not args.no_wheels, args.build, prep=prep)
        print(summary(manifest, pathlib.Path(args.out) if args.out else PACK))
        return 0
    if args.action in ("add", "rows"):
        return _release(args)
    if args.action == "plan":
        return _plan(args)
    if args.action == "run":
        from codeexecutor.campaign.draw import run

        return run()
    if args.action == "deepspeed":
        from codeexecutor.campaign.deepspeed_call import run as deepspeed_run

        return deepspeed_run()
    from codeexecutor.campaign import unpack

    return unpack.run(args)


def _release(args: argparse.Namespace) -> int:
    import re

    from codeexecutor.campaign import release
    from codeexecutor.errors import UsageError

    if args.action == "rows":
        written = release.rows(release.RELEASE, pathlib.Path(args.out), args.sources, args.limit)
        for name, n in written.items():
            print(f"{pathlib.Path(args.out) / (name + '.jsonl')}: {n:,} rows")
        return 0
    if not re.fullmatch(r"[A-Za-z0-9-]+", args.part):
        raise UsageError(f"--part {args.part!r}: use letters, digits and -, e.g. s0of4")
    if not (pathlib.Path(args.prep) / "tokenized").is_dir():
        raise UsageError(
            f"{args.prep} has no tokenized sources: run codeexecutor pretrain --recipe R --out {args.prep} "
            "--until tokenize first"
        )
    manifest = release.add(pathlib.Path(args.prep).resolve(), args.part)
    print(
        f"{release.RELEASE}: {manifest['tokens']:,} tokens in {len(manifest['sources'])} sources, "
        f"{manifest['bytes'] / 2**20:.1f} MiB; fingerprint {manifest['fingerprint']}"
    )
    return 0


def _plan(args: argparse.Namespace) -> int:
    from codeexecutor.campaign.plan import print_plan

    return print_plan(args.pack, args.device)


def _ship_args(p: argparse.ArgumentParser) -> None:
    from codeexecutor.campaign import ship

    ship.add_arguments(p)


def _ship_run(args: argparse.Namespace) -> int:
    from codeexecutor.campaign import ship

    return ship.run(args)


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "draw": (
        "a GPU draw: pack its data here, run it there, unpack what comes back (docs/gpu-draw.md)",
        _draw_args,
        _draw_run,
    ),
    "ship": (
        "ship a trained run's model under models/: bf16, scored on the test samples, with its card",
        _ship_args,
        _ship_run,
    ),
}
