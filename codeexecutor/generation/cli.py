"""`codeexecutor trace`: predict a program's trace, output and runtime error with a model
(the work is generation/api.py's)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from codeexecutor.errors import UsageError
from codeexecutor.generation.api import DEFAULT_MODEL, trace_program, trace_programs
from codeexecutor.generation.decoding import Decoding, decoding_arguments


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", nargs="?", help="Python 3 source file")
    p.add_argument("--stdin", metavar="FILE", help="its input (inlined before the model sees the program)")
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"model folder or hub id (default {DEFAULT_MODEL}: the best shipped trace model)",
    )
    decoding_arguments(p, beam=None)
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.add_argument(
        "--html",
        metavar="OUT",
        help="write the trace viewer page (with --batch: a folder, one page per program and index.html)",
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="also run the program in the sandbox and show the real trace "
        "beside the predicted one (without it, nothing is run)",
    )
    p.add_argument(
        "--fill",
        nargs="?",
        const="model",
        metavar="PREDICTOR",
        help="compare with a guided run: the values the program lacks injected (exec --fill; "
        "empty, dummy, frequency or a value model folder; alone, the shipped value model)",
    )
    p.add_argument("--docstring", metavar="FILE", help="resource description (input spec) prepended as a docstring")
    p.add_argument(
        "--batch",
        metavar="FILE.jsonl",
        help='many programs, decoded in batches: lines of {"code", "stdin"?, "id"?}; JSON lines out',
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="programs decoded together with --batch (default: 64 hypotheses, so 64 programs greedy, 6 at beam 10)",
    )


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.source import read_program, read_text_file

    decoding = Decoding.from_args(args)  # checked once, handed whole to the search
    doc = read_text_file(args.docstring, "docstring file") if args.docstring else None
    if args.batch:
        if args.fill is not None:
            raise UsageError("--fill guides one program's real run: leave it out with --batch")
        return _run_batch(args, doc, decoding)
    if args.fill not in (None, "model", "empty", "dummy", "frequency"):
        from codeexecutor.modeling.value_model import check_folder

        check_folder(args.fill)  # a folder that is not a value model is refused before any decoding
    if not args.program:
        raise UsageError("give a PROGRAM (or --batch FILE.jsonl)")
    source = read_program(args.program)
    stdin = read_text_file(args.stdin, "stdin file") if args.stdin else ""
    report = trace_program(
        source,
        stdin,
        args.model,
        decoding,
        args.compare and args.fill is None,
        args.html if args.fill is None else None,
        doc,
    )
    text = report.pop("text")
    if args.fill is not None:
        text = _guided_beside(report, source, stdin, args.fill, args.html)
    print(json.dumps(report, ensure_ascii=False) if args.json else text)
    return 0


def _guided_beside(report: dict, source: str, stdin: str, spec: str, html_out: str | None = None) -> str:
    """The guided real run (docs/guided-execution.md) as the report's ground truth; the
    readable text; with `html_out`, the viewer page of both, the injections marked."""
    from codeexecutor.generation.api import format_report
    from codeexecutor.generation.fill import guided

    run = guided(source, stdin, spec)
    report["ground_truth"] = run.to_json()
    if html_out:
        from codeexecutor.atomic import write_text
        from codeexecutor.generation.html import render_page, report_page

        page = report_page(source, report, run.result, title="Predicted trace beside the guided real run")
        page["real"]["label"] = f"guided real run ({run.predictor})"
        page["injections"] = [i.to_json() for i in run.injections]
        write_text(html_out, render_page(page))
    lines = [format_report(source.splitlines(), report), f"the real run was guided ({run.predictor}): injected"]
    for inj in run.injections:
        value = f" = {inj.value}" if inj.value is not None else ""
        lines.append(f"  line {inj.line}: {inj.use} {inj.name} as {inj.kind}{value} (p={inj.p:.2f})")
    return "\n".join(lines)


def _run_batch(args: argparse.Namespace, doc: str | None, decoding: Decoding) -> int:
    from codeexecutor.source import read_text_file

    text = read_text_file(args.batch, "batch file")
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item.get("code"), str):
                raise ValueError('no "code" string')
        except (ValueError, AttributeError) as exc:
            raise UsageError(f'{args.batch}:{n}: expected a JSON object with a "code" field ({exc})') from None
        items.append({**item, "id": item.get("id", n)})
    if (args.batch_size or 1) < 1:
        raise UsageError("--batch-size must be >= 1")
    reports = trace_programs(
        items, args.model, decoding, args.compare, doc, batch_size=args.batch_size, pages=bool(args.html)
    )
    pages = []
    for item, rep in zip(items, reports):
        rep.pop("text", None)
        page = rep.pop("_page", None)
        if page is not None:
            pages.append((item["id"], page, {}))
        print(json.dumps({"id": item["id"], **rep}, ensure_ascii=False), flush=True)
    if args.html:
        from codeexecutor.generation.html import write_pages

        if os.path.isfile(args.html):
            raise UsageError(f"--html {args.html} is a file; with --batch it names a folder for the pages")
        index = write_pages(args.html, pages, f"codeexecutor traces of {os.path.basename(args.batch)}")
        print(f"viewer pages: {index}", file=sys.stderr)
    return 0


# The subcommands this module defines, by name: (help, add_arguments, run); codeexecutor/cli.py lists them.
COMMANDS = {
    "trace": ("predict a program's execution trace, output and runtime error with a trained model", _args, _run),
}
