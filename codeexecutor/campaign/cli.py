"""`codeexecutor draw pack|plan|run|unpack` and `codeexecutor ship`: a GPU draw from its pack
to a shipped model (docs/gpu-draw.md).

    codeexecutor draw pack [--recipe R] [--data DIR]   # here: build, tokenize and pack (.campaign/)
    bash run_draw.sh                                    # there: the draw (`draw run` after the wheels)
    codeexecutor draw unpack DIR [--install models/N]  # here: join, load and score what came back
"""

from __future__ import annotations

import argparse
import os
import pathlib

from codeexecutor.cli import register

ASSUMED_TOKENS_PER_S = 1.5e6  # the training step's target on one H100 (`small`, 48 k tokens a step), for `draw plan`


def _draw_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pk = sub.add_parser("pack", help="build (where missing), tokenize and pack a recipe's data for a draw into .campaign/")
    pk.add_argument("--recipe", help="the draw's recipe (default curricula/recipes/gpu-draw.yaml; curricula/demo.yaml "
                    "with --smoke)")
    pk.add_argument("--data", help="built datasets to pack instead of the recipe's data.dir (each source found as "
                    "BUILD/NAME under it)")
    pk.add_argument("--prep", help="folder of the pretrain phases that prepare the data (default runs/draw-prep): "
                    "resumable, kept between packs")
    pk.add_argument("--out", help="the pack's folder (default .campaign)")
    pk.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                    help="change one field of the recipe (data.dir=runs/x); repeatable")
    pk.add_argument("--smoke", action="store_true", help="the demo recipe, no wheels: the CPU smoke run's pack")
    pk.add_argument("--no-wheels", action="store_true", help="carry no wheels (a device that has every package)")
    pk.add_argument("--workers", type=int, help="processes compressing the sources (default: every core)")
    pk.add_argument("--assume-python", metavar="X.Y", help="the interpreter that traced a build made before builds "
                    "recorded it (their stats.json has no `python`)")
    pl = sub.add_parser("plan", help="the draw's steps and time limits, and the tokens the pack carries")
    pl.add_argument("--pack", help="the pack (default .campaign, or CAMPAIGN_PACK)")
    sub.add_parser("run", help="the draw itself, on the lent GPU machine (run_draw.sh installs the wheels first)")
    from codeexecutor.campaign import unpack

    unpack.add_arguments(sub.add_parser("unpack", help="join, load and score again on this machine what a draw brought "
                                        "back"))


def _draw_run(args: argparse.Namespace) -> int:
    if args.action == "pack":
        from codeexecutor.campaign.pack import PACK, pack, summary

        manifest = pack(args.recipe, args.out, args.prep, args.data, args.overrides, args.smoke, args.assume_python,
                        args.workers, wheels=not args.no_wheels)
        print(summary(manifest, pathlib.Path(args.out) if args.out else PACK))
        return 0
    if args.action == "plan":
        return _plan(args)
    if args.action == "run":
        from codeexecutor.campaign.draw import run

        return run()
    from codeexecutor.campaign import unpack

    return unpack.run(args)


def _plan(args: argparse.Namespace) -> int:
    import json

    from codeexecutor.campaign import steps
    from codeexecutor.errors import UsageError

    print(steps.plan())
    total = sum(s[0] for s in steps.STEPS.values())
    if total > steps.BUDGET:
        raise UsageError(f"the plan's steps add up to {total} s, over the draw's {steps.BUDGET}")
    manifest_path = pathlib.Path(args.pack or os.environ.get("CAMPAIGN_PACK") or steps.ROOT / ".campaign") / "manifest.json"
    if not manifest_path.is_file():
        print(f"no pack at {manifest_path.parent}: `codeexecutor draw pack` makes one")
        return 0
    manifest = json.loads(manifest_path.read_text())
    seconds = steps.BUDGET - sum(s[0] for k, s in steps.STEPS.items() if k != "train")
    print(data_plan(manifest, seconds * ASSUMED_TOKENS_PER_S, manifest_path.parent))
    return 0


def data_plan(manifest: dict, trained: float, pack: pathlib.Path) -> str:
    """Tokens carried a source, and the epochs a training of `trained` tokens makes over
    each: a stage takes its share of the tokens, and its sources their weights' share of
    the stage's examples (so of its tokens, by each source's tokens a row)."""
    import tarfile

    import yaml

    sources = manifest["sources"]
    per_row = {name: s["tokens"] / max(s["rows"], 1) for name, s in sources.items()}
    taken = dict.fromkeys(sources, 0.0)
    with tarfile.open(pack / "data.tar.xz") as tar:
        recipe = yaml.safe_load(tar.extractfile("data/curriculum.yaml").read())
    stages = recipe["stages"]
    for st in stages:
        share = st.get("share") or 1 / len(stages)
        srcs = [(os.path.basename(s["path"]), s.get("weight", 1.0)) for s in st["sources"]]
        mass = sum(w * per_row[n] for n, w in srcs)
        for n, w in srcs:
            taken[n] += trained * share * w * per_row[n] / mass
    lines = [f"{'source':<28} {'rows':>10} {'tokens':>12} {'MiB':>6} {'B/token':>8} {'epochs':>7}"]
    for name, s in sorted(sources.items()):
        lines.append(f"{name:<28} {s['rows']:>10,} {s['tokens']:>12,} {s['bytes'] / 2**20:>6.1f} "
                     f"{s['bytes'] / max(s['tokens'], 1):>8.3f} {taken[name] / max(s['tokens'], 1):>7.2f}")
    lines.append(f"{'carried':<28} {sum(s['rows'] for s in sources.values()):>10,} {manifest['tokens']:>12,} "
                 f"{sum(s['bytes'] for s in sources.values()) / 2**20:>6.1f}   trained: {trained / 1e6:.0f} M tokens "
                 f"at {ASSUMED_TOKENS_PER_S / 1e6:.1f} M/s (assumed)")
    return "\n".join(lines)


register("draw", "a GPU draw: pack its data here, run it there, unpack what comes back (docs/gpu-draw.md)", _draw_args,
         _draw_run)


def _ship_args(p: argparse.ArgumentParser) -> None:
    from codeexecutor.campaign import ship

    ship.add_arguments(p)


def _ship_run(args: argparse.Namespace) -> int:
    from codeexecutor.campaign import ship

    return ship.run(args)


register("ship", "ship a trained run's model under models/: bf16, scored on the test samples, with its card", _ship_args,
         _ship_run)
