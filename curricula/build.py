"""One dataset built by a function call: `build(kind, out, options)`.

The builders a recipe can name (`data.builds` of curricula/recipes/*.yaml) behind one
entry point, with their options under the names a recipe gives them and their defaults in
one table (`DEFAULTS`) that the command line's flags read too. `codeexecutor build KIND`
and `codeexecutor pretrain`'s build phase both come here, so a recipe's build and the
command's build are the same call.
"""

from __future__ import annotations

import glob
import os
from types import SimpleNamespace

from codeexecutor.errors import UsageError

# Each kind's options, by the name a recipe gives them (the command line's flag, `-` as `_`),
# with its default. `from` is the folder(s) read; None where the command requires it.
DEFAULTS: dict[str, dict] = {
    "codenetmut": {
        "codenet": None,
        "mutants": 20,  # the paper's 20 mutation attempts a program
        "workers": 2,
        "shard": "0/1",
        "limit": None,
        "seed": 0,
        "all_statuses": False,
        "no_heldout_mutants": False,
    },
    "functions": {
        "from": None,
        "mutants": 8,
        "input_mutants": 4,
        "workers": 2,
        "shard": "0/1",
        "limit": None,
        "seed": 0,
        "humaneval": None,
        "no_decontaminate": False,
        "licence": None,
        "lineage": False,
    },
    "tutorial": {"sources": None, "mutants": 100, "workers": 2, "seed": 0},
    "singleline": {"from": None, "kaggle": None, "workers": 2, "limit": None, "per_line": 4, "augment": 0},
    # the debugger's actions drawn from a built folder's runs (curricula/actions.py)
    "actions": {"from": None, "per_program": 2, "limit": None, "max_chars": 2000, "order": "end", "seed": 0},
    # contest programs (codenet) or the functions' call programs (from) with one realistic
    # bug each, run on their input (curricula/bugs.py)
    "bugs": {"codenet": None, "from": None, "per_bug": 2, "workers": 2, "shard": "0/1", "limit": None, "seed": 0},
    # value-use events of real runs, guided execution's data (curricula/values.py)
    "values": {"from": None, "codenet": None, "test": None, "valid": None, "workers": 2, "limit": None},
}


def options_of(kind: str, given: dict) -> SimpleNamespace:
    """The kind's options: its defaults with `given` over them; an option the kind does not
    have is refused in one line that lists those it has."""
    if kind not in DEFAULTS:
        raise UsageError(f"no dataset kind {kind!r}: build one of {', '.join(DEFAULTS)}")
    unknown = sorted(set(given) - set(DEFAULTS[kind]))
    if unknown:
        raise UsageError(f"a {kind} build has no option {', '.join(unknown)} (it has {', '.join(DEFAULTS[kind])})")
    return SimpleNamespace(**{**DEFAULTS[kind], **given})


def check_inputs(kind: str, opts: SimpleNamespace, out: str = "") -> None:
    """Refuse bad inputs before anything is written to the output folder."""
    from curricula.common import built_datasets

    if kind == "bugs" and bool(opts.codenet) == bool(opts.__dict__["from"]):
        raise UsageError(
            "a bugs build reads one of codenet (contest programs: --codenet DIR) or from (folders of modules "
            "with doctests or tests: --from DIR)"
        )
    if kind == "bugs" and opts.__dict__["from"]:
        check_inputs("functions", SimpleNamespace(**{**DEFAULTS["functions"], "from": opts.__dict__["from"]}), out)
    elif kind in ("codenetmut", "bugs"):
        if not opts.codenet:
            raise UsageError(f"a {kind} build needs codenet: the Project CodeNet root(s) it reads")
        for root in opts.codenet:
            if not os.path.isdir(os.path.join(root, "data")):
                raise UsageError(
                    f"{root} does not look like Project CodeNet: no data/ folder "
                    "(expected data/pXXXXX/Python/sXXXXXXXXX.py)"
                )
    elif kind == "functions":
        for root in opts.__dict__["from"] or []:
            if not os.path.isdir(root):
                raise UsageError(
                    f"--from {root}: not a folder (give folders of Python modules, reST documentation "
                    "or puzzle generators)"
                )
            if not (
                glob.glob(os.path.join(root, "**", "*.py"), recursive=True) or glob.glob(os.path.join(root, "*.rst*"))
            ):
                raise UsageError(f"--from {root}: no .py files under it and no *.rst / *.rst.txt documentation in it")
        if not opts.__dict__["from"]:
            raise UsageError("a functions build needs from: the folders of modules it reads")
        if opts.humaneval and not os.path.isfile(opts.humaneval):
            raise UsageError(f"--humaneval {opts.humaneval}: no such file (HumanEval.jsonl.gz, or --no-decontaminate)")
    elif kind == "values":
        if not opts.__dict__["from"] and not opts.codenet:
            raise UsageError("a values build needs from (folders of modules) or codenet (contest programs), or both")
        for root in [*(opts.__dict__["from"] or []), *(opts.codenet or [])]:
            if not os.path.isdir(root):
                raise UsageError(f"{root}: not a folder (give folders of Python modules or CodeNet-layout corpora)")
    elif kind == "tutorial" and opts.sources is not None:
        if not glob.glob(os.path.join(opts.sources, "*.rst.txt")):
            raise UsageError(
                f"no tutorial sources in {opts.sources} (expected *.rst.txt files, e.g. "
                "../shared/data/python-tutorial/tutorial_rst)"
            )
    elif kind == "actions":
        from curricula.actions import check_source

        check_source(opts.__dict__["from"], out, opts)
    elif kind == "singleline":
        source = opts.__dict__["from"]
        if bool(source) == bool(opts.kaggle):
            raise UsageError("give exactly one of --from DIR (a built dataset) or --kaggle FILE")
        if source:
            built_datasets(source, "--from folder")


def build(kind: str, out: str, given: dict | None = None) -> dict:
    """Build a dataset of `kind` into `out` (resumable: a stopped build carries on from its
    journal); its stats. `given`: options by their recipe names (`DEFAULTS`)."""
    opts = options_of(kind, dict(given or {}))
    for name in ("codenet", "from"):  # a folder option takes one folder or a list of them
        if isinstance(getattr(opts, name, None), str) and not (kind in ("singleline", "actions") and name == "from"):
            setattr(opts, name, [getattr(opts, name)])
    check_inputs(kind, opts, out)
    if kind in ("codenetmut", "functions", "bugs"):
        from curricula.codenet import shard_arg
        from curricula.common import BuildSetup

        setup = BuildSetup(workers=opts.workers, shard=shard_arg(opts.shard), seed=opts.seed, limit=opts.limit)
    if kind == "codenetmut":
        from curricula.codenet import CodeNetBuilder

        builder = CodeNetBuilder(
            list(opts.codenet),
            out,
            mutants=opts.mutants,
            setup=setup,
            accepted_only=not opts.all_statuses,
            heldout_mutants=not opts.no_heldout_mutants,
        )
        return builder.run()
    if kind == "bugs":  # contest programs (--codenet) or the functions' calls (--from)
        from curricula.bugs import BugsBuilder, FunctionBugsBuilder

        functions = opts.__dict__["from"]
        make = FunctionBugsBuilder if functions else BugsBuilder
        builder = make(
            list(functions or opts.codenet),
            out,
            per_bug=opts.per_bug,
            setup=setup,
        )
        return builder.run()
    if kind == "functions":
        from curricula.functions import HUMANEVAL, FunctionsBuilder

        builder = FunctionsBuilder(
            list(opts.__dict__["from"]),
            out,
            mutants=opts.mutants,
            input_mutants=opts.input_mutants,
            setup=setup,
            humaneval=None if opts.no_decontaminate else (opts.humaneval or HUMANEVAL),
            lineage=opts.lineage,
            licence=opts.licence,
        )
        return builder.run()
    if kind == "values":
        from curricula.values import TEST_PACKAGES, VALID_PACKAGES, ValuesBuilder

        builder = ValuesBuilder(
            list(opts.__dict__["from"] or []),
            list(opts.codenet or []),
            out,
            test=tuple(opts.test or TEST_PACKAGES),
            valid=tuple(opts.valid or VALID_PACKAGES),
            workers=opts.workers,
            limit=opts.limit,
        )
        return builder.run()
    if kind == "tutorial":
        from curricula.tutorial import build_tutorial

        return build_tutorial(out, sources=opts.sources, mutants=opts.mutants, workers=opts.workers, seed=opts.seed)
    if kind == "actions":
        from curricula.actions import build_actions

        return build_actions(
            out,
            opts.__dict__["from"],
            per_program=opts.per_program,
            limit=opts.limit,
            max_chars=opts.max_chars,
            order=opts.order,
            seed=opts.seed,
        )
    from curricula.singleline import build_singleline

    return build_singleline(
        out,
        source=opts.__dict__["from"],
        kaggle=opts.kaggle,
        workers=opts.workers,
        limit=opts.limit,
        per_line=opts.per_line,
        augment=opts.augment,
    )
