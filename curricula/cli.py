"""`codeexecutor build {codenetmut,functions,bugs,merge,decontaminate,tutorial,singleline}` and `codeexecutor stats`."""

from __future__ import annotations

import argparse
import json
import os

from codeexecutor.errors import UsageError
from curricula.build import DEFAULTS


def _build_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="dataset", metavar="DATASET", required=True)
    for add in (
        _codenetmut_args,
        _functions_args,
        _merge_args,
        _decontaminate_args,
        _tutorial_args,
        _singleline_args,
        _actions_args,
        _values_args,
        _bugs_args,
    ):
        add(sub)


def _codenetmut_args(sub) -> None:
    c = sub.add_parser("codenetmut", help="mutants of CodeNet submissions run on their sample inputs")
    c.add_argument(
        "--codenet",
        required=True,
        metavar="DIR",
        nargs="+",
        help="Project CodeNet root(s) (data/, metadata/, derived/); several corpora in that layout build one dataset",
    )
    c.add_argument("--out", required=True, metavar="DIR", help="output folder (journal, datasets, stats.json)")
    c.add_argument("--mutants", type=int, help="mutation attempts per program (default %(default)s)")
    c.add_argument("--workers", type=int, help="sandbox workers (default %(default)s)")
    c.add_argument("--shard", metavar="I/N", help="process every N-th program from I (default %(default)s)")
    c.add_argument("--limit", type=int, help="only the first LIMIT programs of the shard (demo-size builds)")
    c.add_argument("--seed", type=int)
    c.add_argument(
        "--all-statuses", action="store_true", help="also use programs whose metadata status is not Accepted"
    )
    c.add_argument(
        "--no-heldout-mutants", action="store_true", help="valid/test problems give only their original programs"
    )
    c.set_defaults(**DEFAULTS["codenetmut"])


def _functions_args(sub) -> None:
    f = sub.add_parser("functions", help="functions called on their doctest and unit-test inputs, traced and mutated")
    f.add_argument(
        "--from",
        dest="roots",
        required=True,
        metavar="DIR",
        nargs="+",
        help="folders of Python modules (a package, a repository checkout, an unpacked sdist) with doctests "
        "or test files; folders of reST documentation with >>> sessions; a puzzle-generator tree",
    )
    f.add_argument("--out", required=True, metavar="DIR", help="output folder (journal, datasets, stats.json)")
    f.add_argument("--mutants", type=int, help="mutation attempts on each program's definitions (default %(default)s)")
    f.add_argument(
        "--input-mutants", type=int, help="attempts at new literal arguments of each call (default %(default)s)"
    )
    f.add_argument("--workers", type=int, help="sandbox workers (default %(default)s)")
    f.add_argument("--shard", metavar="I/N", help="process every N-th module from I (default %(default)s)")
    f.add_argument("--limit", type=int, help="only the first LIMIT modules of the shard")
    f.add_argument("--seed", type=int)
    f.add_argument(
        "--humaneval",
        metavar="FILE",
        help="HumanEval problems (JSON lines, .gz or not) whose functions are "
        "kept out (default: ../shared/data/humaneval/HumanEval.jsonl.gz where it exists)",
    )
    f.add_argument("--no-decontaminate", action="store_true", help="keep functions that look like HumanEval problems")
    f.add_argument(
        "--licence",
        metavar="NAME",
        help="the licence of a folder in which none is found (a LICENSE, COPYING, "
        "PKG-INFO or dist-info file): stamped on its rows; without it such a folder is refused",
    )
    f.add_argument(
        "--lineage",
        action="store_true",
        help="the roots are versions of one repository (snapshots of its "
        "history): split by module path across them, so every version of a module lands in one split",
    )
    f.set_defaults(**{k: v for k, v in DEFAULTS["functions"].items() if k != "from"})


def _merge_args(sub) -> None:
    m = sub.add_parser(
        "merge", help="merge the outputs of --shard I/N codenetmut (or functions) builds into one dataset"
    )
    m.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="the --out folders of the shard builds")
    m.add_argument("--out", required=True, metavar="DIR")
    m.add_argument(
        "--partial",
        action="store_true",
        help="merge the finished units of the shards given, even where "
        "shards are missing or unfinished (by default the merge refuses them)",
    )


def _decontaminate_args(sub) -> None:
    d = sub.add_parser(
        "decontaminate",
        help="report which programs of a finished functions build appear in HumanEval, its LLM samples, MBPP "
        "or the contest corpora",
    )
    d.add_argument("build", metavar="BUILD_DIR", help="a `build functions` output folder")
    d.add_argument(
        "--references",
        metavar="DIR",
        default=os.path.join("..", "shared", "data"),
        help="the folder holding humaneval/ and atcoder-python*/ (default ../shared/data); those missing are left out",
    )
    d.add_argument("--out", metavar="FILE", help="the report (default BUILD_DIR/decontamination.json)")


def _tutorial_args(sub) -> None:
    t = sub.add_parser("tutorial", help="runnable examples of the Python tutorial, multiplied with CRP mutants")
    t.add_argument("--out", required=True, metavar="DIR")
    t.add_argument(
        "--sources",
        metavar="DIR",
        help="folder of tutorial .rst.txt files (default: python3.11-doc's, "
        "then ../shared/data/python-tutorial/tutorial_rst)",
    )
    t.add_argument("--mutants", type=int, help="CRP mutation attempts per snippet (default %(default)s)")
    t.add_argument("--workers", type=int)
    t.add_argument("--seed", type=int)
    t.set_defaults(**DEFAULTS["tutorial"])


def _singleline_args(sub) -> None:
    s = sub.add_parser("singleline", help="one-line examples derived from traced programs")
    s.add_argument("--out", required=True, metavar="DIR")
    s.add_argument(
        "--from", dest="source", metavar="DIR", help="a built codenetmut/tutorial output folder to derive from"
    )
    s.add_argument("--kaggle", metavar="FILE", help="convert the original python-state-changes JSON(L) instead")
    s.add_argument("--workers", type=int)
    s.add_argument("--limit", type=int, help="at most this many examples")
    s.add_argument(
        "--per-line",
        type=int,
        metavar="K",
        help="at most K examples per statement of a source program, so hot loops do not fill the "
        "dataset (default %(default)s; 0: no cap)",
    )
    s.add_argument(
        "--augment",
        type=int,
        metavar="K",
        help="add up to K variants of every training program: new variable names and freshly drawn "
        "values, each run in the sandbox for its target (default %(default)s: none; valid/test never)",
    )
    s.set_defaults(**{k: v for k, v in DEFAULTS["singleline"].items() if k != "from"})


def _actions_args(sub) -> None:
    a = sub.add_parser("actions", help="the debugger's actions (next, out, continue) drawn from a build's runs")
    a.add_argument("--out", required=True, metavar="DIR")
    a.add_argument("--from", dest="source", required=True, metavar="DIR", help="a built codenetmut/functions folder")
    a.add_argument("--per-program", type=int, metavar="K", help="actions drawn from each run (default %(default)s)")
    a.add_argument("--limit", type=int, metavar="N", help="at most N runs of each split, drawn at random")
    a.add_argument(
        "--max-chars",
        type=int,
        metavar="C",
        help="longest given steps, in characters of a compact trace (default %(default)s): a longer "
        "trace would be cut before its landing",
    )
    a.add_argument(
        "--order",
        choices=("end", "start"),
        help="the step order of the model trained on them (its step_order; default %(default)s)",
    )
    a.add_argument("--seed", type=int)
    a.set_defaults(**{k: v for k, v in DEFAULTS["actions"].items() if k != "from"})


def _values_args(sub) -> None:
    v = sub.add_parser("values", help="value-use events of real runs: what guided execution (exec --fill) learns")
    v.add_argument("--out", required=True, metavar="DIR")
    v.add_argument("--from", dest="roots", nargs="+", metavar="DIR", help="folders of modules (packages, collections)")
    v.add_argument("--codenet", nargs="+", metavar="DIR", help="CodeNet-layout corpora, run on their first input")
    v.add_argument("--test", nargs="+", metavar="PKG", help="packages held out for the test split")
    v.add_argument("--valid", nargs="+", metavar="PKG", help="packages held out for the valid split")
    v.add_argument("--workers", type=int)
    v.add_argument("--limit", type=int, metavar="N", help="the first N modules and problems only")
    v.set_defaults(**{k: val for k, val in DEFAULTS["values"].items() if k != "from"})


def _bugs_args(sub) -> None:
    b = sub.add_parser(
        "bugs", help="contest programs (or the functions' calls) with one realistic bug each, run: the errors set"
    )
    b.add_argument("--codenet", nargs="+", metavar="DIR", help="CodeNet-layout corpora")
    b.add_argument(
        "--from",
        dest="roots",
        nargs="+",
        metavar="DIR",
        help="instead of --codenet: folders of Python modules whose doctests and tests make the programs "
        "(as build functions reads them); the output is a functions build's layout",
    )
    b.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output folder (journal, stats.json, and bugs/, or with --from functions/ and functions_errors/)",
    )
    b.add_argument("--per-bug", type=int, help="variants per bug class and program (default %(default)s)")
    b.add_argument("--workers", type=int, help="sandbox workers (default %(default)s)")
    b.add_argument("--shard", metavar="I/N", help="process every N-th program from I (default %(default)s)")
    b.add_argument("--limit", type=int, help="only the first LIMIT programs of the shard")
    b.add_argument("--seed", type=int)
    b.set_defaults(**{k: v for k, v in DEFAULTS["bugs"].items() if k != "from"})


def _build_run(args: argparse.Namespace) -> int:
    if args.dataset == "decontaminate":
        return _decontaminate(args)
    if args.dataset == "merge":
        from curricula.codenet import merge_shards

        stats = merge_shards(args.out, args.shards, partial=args.partial)
    else:
        from curricula.build import DEFAULTS, build

        # the flags' destinations under the names a recipe gives the options
        named = {**vars(args), "from": getattr(args, "roots", getattr(args, "source", None))}
        stats = build(args.dataset, args.out, {key: named[key] for key in DEFAULTS[args.dataset]})
    print(json.dumps(stats.get("datasets", stats), indent=2))
    return 0


def _decontaminate(args: argparse.Namespace) -> int:
    from curricula.decontaminate import decontaminate

    if not any(os.path.isdir(os.path.join(args.build, n)) for n in ("functions", "functions_errors")):
        raise UsageError(
            f"{args.build} is not a functions build: no functions/ or functions_errors/ in it "
            "(give the --out folder of `codeexecutor build functions`)"
        )
    if not os.path.isdir(args.references):
        raise UsageError(
            f"--references {args.references}: not a folder (the one holding humaneval/ and atcoder-python*/)"
        )
    report = decontaminate(args.build, args.references, args.out)
    for name, entry in report["references"].items():
        print(
            f"{name}: {entry['reference_size']} programs; shared with the build: whole programs "
            f"{entry['programs']}, definitions {entry['definitions']} (originals {entry['definitions_originals']})"
        )
    return 0


def _stats_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dirs", nargs="+", metavar="DIR", help="built dataset folders (their stats go to DIR/table2.json, .png)"
    )
    p.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="a model (or tokenizer) folder: count trace lengths of both trace "
        "formats in its BPE tokens (default: whitespace-separated pieces)",
    )


def _stats_run(args: argparse.Namespace) -> int:
    from curricula.common import built_datasets
    from curricula.stats import dataset_stats, print_table

    for d in args.dirs:
        built_datasets(d)
    for d in args.dirs:
        print_table(dataset_stats(d, tokenizer=args.tokenizer))
    return 0


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "build": (
        "build a dataset (codenetmut, functions, tutorial, singleline, actions, values, bugs)",
        _build_args,
        _build_run,
    ),
    "stats": ("Table 2 statistics of built datasets, with distribution plots", _stats_args, _stats_run),
}
