"""`codeexecutor mutate`: mutants of one program, optionally executed."""

from __future__ import annotations

import argparse
import difflib
import json
import sys

from codeexecutor.errors import UsageError


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", nargs="?", help="Python 3 source file to mutate")
    p.add_argument("-n", type=int, default=20, help="mutation attempts (mutants after dedup <= n; default 20)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--p", type=float, default=0.5, help="probability of mutating each site (default 0.5)")
    p.add_argument("--operators", help="comma-separated subset, e.g. CRP,AOR (default: all twelve)")
    p.add_argument("--jsonl", action="store_true", help="one JSON object per mutant: code, operators, edits")
    p.add_argument("--list-operators", action="store_true", help="print the operators and exit")
    p.add_argument("--execute", action="store_true", help="run each mutant in the sandbox and add its status and trace")
    p.add_argument("--stdin", metavar="FILE", help="input for --execute")
    p.add_argument("--timeout", type=float, default=1.0, help="CPU seconds per mutant with --execute")


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.source import read_program, read_text_file
    from mutation import OPERATORS, MutationError, MutationStats, mutate

    if args.list_operators:
        for name, op in OPERATORS.items():
            print(f"{name}  {op.description}")
        return 0
    if not args.program:
        raise UsageError("give a PROGRAM to mutate (or --list-operators)")
    if args.n < 0:
        raise UsageError(f"-n must be >= 0, got {args.n}")
    if args.stdin and not args.execute:
        raise UsageError("--stdin goes with --execute")
    source = read_program(args.program)
    stats = MutationStats()
    try:
        mutants = mutate(source, n=args.n, seed=args.seed, p=args.p, operators=args.operators, stats=stats)
    except MutationError as exc:
        raise UsageError(f"{args.program}: {exc}; fix the syntax or run `codeexecutor exec` to see the error") from exc
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    records = [m.to_json() for m in mutants]
    if args.execute:
        from codeexecutor.execution import ExecutorPool, Limits, Program

        stdin = read_text_file(args.stdin, "stdin file") if args.stdin else ""
        with ExecutorPool(workers=2, limits=Limits(timeout=args.timeout), prestart=("numpy",)) as pool:
            for key, result in pool.execute_many(Program(r["code"], stdin, i) for i, r in enumerate(records)):
                records[key].update(result.to_json())
    if args.jsonl:
        for r in records:
            print(json.dumps(r, ensure_ascii=False))
    else:
        original = source.splitlines(keepends=True)
        for i, r in enumerate(records):
            status = f"  [{r['status']}{' ' + r['error']['type'] if r.get('error') else ''}]" if args.execute else ""
            print(f"# mutant {i}: {', '.join(r['operators'])}{status}")
            sys.stdout.writelines(
                difflib.unified_diff(original, r["code"].splitlines(keepends=True), "original", f"mutant {i}", n=0)
            )
            print()
    print(
        f"# {stats.emitted} mutants from {stats.attempts} attempts "
        f"(duplicates {stats.duplicate}, unparsable {stats.unparsable}, "
        f"not compilable {stats.not_compilable}, no site chosen {stats.no_edit})",
        file=sys.stderr,
    )
    return 0


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "mutate": ("generate mutants of a program with the twelve tree-sitter operators", _args, _run),
}
