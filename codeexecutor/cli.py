"""The `codeexecutor` command: one table of subcommands.

Each entry maps a name to (help, add_arguments, run). `run(args)` returns the exit code.
Errors meant for the user are `CodeExecutorError`s: printed as one line, exit code 2.
Heavy dependencies are imported inside the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import sys
from collections.abc import Callable

from codeexecutor.errors import CodeExecutorError, UsageError

Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
MODEL_PACKAGES = ("torch", "transformers", "tokenizers", "deepspeed", "evaluate", "safetensors")


# -- exec --------------------------------------------------------------------------------
def _exec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", help="Python 3 source file to run")
    p.add_argument("--stdin", metavar="FILE", help="file whose contents the program reads on stdin")
    p.add_argument("--timeout", type=float, default=1.0, help="CPU seconds (default 1.0)")
    p.add_argument("--memory", type=int, default=1024, metavar="MB", help="address-space limit (default 1024)")
    p.add_argument("--max-steps", type=int, default=1024, help="executed lines before trace_limit (default 1024)")
    p.add_argument("--value-limit", type=int, default=100, help="characters per rendered value (default 100)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the readable trace")
    p.add_argument(
        "--fill",
        nargs="?",
        const="model",
        metavar="PREDICTOR",
        help="inject the values the program lacks (undefined names, missing modules, what injected values give): "
        "empty, dummy, frequency, or a value model folder; alone, the shipped value model",
    )
    p.add_argument(
        "--tries", type=int, default=6, metavar="N", help="with --fill: runs with other candidates (default 6)"
    )


def _limits(args: argparse.Namespace):
    from codeexecutor.execution import Limits

    try:
        return Limits(
            timeout=args.timeout, memory_mb=args.memory, max_steps=args.max_steps, value_limit=args.value_limit
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _read_stdin_arg(path: str | None) -> str:
    from codeexecutor.source import read_text_file

    return read_text_file(path, "stdin file") if path else ""


def _exec_run(args: argparse.Namespace) -> int:
    from codeexecutor.execution import ExecutorPool
    from codeexecutor.execution.display import format_result
    from codeexecutor.source import read_program

    source = read_program(args.program)
    stdin = _read_stdin_arg(args.stdin)
    limits = _limits(args)
    if args.fill is not None:
        return _exec_fill(args, source, stdin, limits)
    with ExecutorPool(workers=1, limits=limits) as pool:
        result = pool.execute(source, stdin)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        print(format_result(source, result))
    return 0


def _exec_fill(args: argparse.Namespace, source: str, stdin: str, limits) -> int:
    from codeexecutor.execution.display import format_guided
    from codeexecutor.generation.fill import guided

    run = guided(source, stdin, args.fill, args.tries, limits)
    if args.json:
        print(json.dumps(run.to_json(), ensure_ascii=False))
    else:
        print(format_guided(source, run))
    return 0


# -- inline ------------------------------------------------------------------------------
def _inline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", help="Python 3 source file that reads stdin")
    p.add_argument("--stdin", metavar="FILE", required=True, help="the input to inline")
    p.add_argument(
        "--no-verify", action="store_true", help="skip checking that the inlined program prints the same output"
    )


def _inline_run(args: argparse.Namespace) -> int:
    from codeexecutor.execution.inline import InlineError, inline_stdin
    from codeexecutor.source import read_program

    source = read_program(args.program)
    stdin = _read_stdin_arg(args.stdin)
    try:
        result = inline_stdin(source, stdin, verify=not args.no_verify)
    except InlineError as exc:
        print(f"codeexecutor inline: cannot inline {args.program}: {exc.reason}: {exc.detail}", file=sys.stderr)
        return 1
    sys.stdout.write(result.source)
    return 0


OWN: dict[str, Command] = {
    "exec": ("run a program in the sandbox and print its ground-truth trace", _exec_args, _exec_run),
    "inline": ("replace a program's stdin reads by the literal values they read", _inline_args, _inline_run),
}


def commands() -> dict[str, Command]:
    """Every subcommand, in the order `--help` lists them: this module's, then each
    package's `COMMANDS` table, imported here by name (each imports its heavy
    dependencies inside its `run`)."""
    from codeexecutor import packed_cli, ship, train_cli
    from codeexecutor.debugger import cli as debug_cli
    from codeexecutor.generation import cli as trace_cli
    from curricula import cli as build_cli
    from eval import cli as eval_cli
    from mutation import cli as mutate_cli

    table = dict(OWN)
    for module in (mutate_cli, build_cli, train_cli, trace_cli, debug_cli, eval_cli, packed_cli, ship):
        for name, entry in module.COMMANDS.items():
            if name in table:  # a second definition would silently replace the first
                raise RuntimeError(f"{module.__name__} defines the command {name!r} another module defines")
            table[name] = entry
    return table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codeexecutor", description="Teach a transformer to execute Python: trace, mutate, build, train, evaluate."
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, add_arguments, run) in commands().items():
        p = sub.add_parser(name, help=help_, description=help_)
        add_arguments(p)
        p.set_defaults(_run=run)
    return parser


def _version() -> str:
    import codeexecutor

    return f"codeexecutor {codeexecutor.__version__}"


def main(argv: list[str] | None = None) -> int:
    from codeexecutor.progress import quiet_libraries

    quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return args._run(args)
    except CodeExecutorError as exc:  # one line: a multi-line message (every problem of a config) is joined
        lines = (line.strip() for line in str(exc).splitlines())
        # a bullet's "- " goes; a flag's "--" stays
        message = "; ".join(line[2:] if line.startswith("- ") else line for line in lines if line)
        print(f"codeexecutor {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"codeexecutor {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # Builds journal each finished unit and write datasets aside first: the same command resumes.
        print(
            f"codeexecutor {args.command}: error: no space left on the device writing {exc.filename or 'its output'}: "
            "free some space (or choose another --out) and run the same command again; finished work is kept",
            file=sys.stderr,
        )
        return 2
    except ModuleNotFoundError as exc:
        if exc.name not in MODEL_PACKAGES:
            raise
        # A light environment (.venv-3.12, ...) holds the model-free part only.
        print(
            f"codeexecutor {args.command}: error: this command runs a model and needs {exc.name}, which this "
            f"Python ({sys.executable}) lacks: run it from the full environment (make venv; .venv/bin/codeexecutor)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
