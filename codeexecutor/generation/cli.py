"""`codeexecutor trace`: predict a program's trace, output and runtime error with a model."""

from __future__ import annotations

import argparse
import json
import logging
import os

from codeexecutor.cli import register
from codeexecutor.errors import UsageError
from codeexecutor.generation.verdict import finite_margin

log = logging.getLogger("codeexecutor.trace")
DEFAULT_MODEL = os.path.join("demo_out", "pretrain", "final")

_GENERATORS: dict = {}


def _generator(model: str):
    """One loaded generator per model (a folder, or a hub id: modeling/loading.py)."""
    from codeexecutor.generation.search import TraceGenerator

    if model not in _GENERATORS:
        _GENERATORS[model] = TraceGenerator(model)
    return _GENERATORS[model]


def prepare(source: str, stdin: str, docstring: str | None = None) -> tuple[str, int, list[str]]:
    """(code the model sees, line offset of the docstring, notes): stdin inlined
    statically, without running the program (execution/inline_static.py: the same form
    the dataset builders record), and the optional resource description prepended as a
    docstring (Bieber et al.)."""
    from codeexecutor.execution.inline import InlineError
    from codeexecutor.execution.inline_static import inline_static

    notes = []
    code = source
    if stdin or "input" in source or "stdin" in source or "open(0" in source:
        try:
            code = inline_static(source, stdin).source
        except InlineError as exc:
            notes.append(f"stdin not inlined ({exc.reason}: {exc.detail}); the model sees the reads as written")
    offset = 0
    if docstring:
        doc = '"""' + docstring.replace('"""', "'''").strip() + '\n"""\n'
        offset = doc.count("\n")
        code = doc + code
    return code, offset, notes


def trace_program(source: str, stdin: str = "", model: str = DEFAULT_MODEL, beam: int = 10, max_length: int | None = None,
                  compare: bool = False, html_out: str | None = None, docstring: str | None = None, names: bool = False,
                  exception_bias: float = 0.0, values: bool = False, exception_at: str = "step", **kw) -> dict:
    """Predict one program's trace; returns the JSON report (plus 'text', the readable form)."""
    from codeexecutor.modeling.format import FormatError

    html_out = html_out or kw.get("html")
    code, offset, notes = prepare(source, stdin, docstring)
    generator = _generator(model)
    try:
        model_input = generator.code_input(code, "codenet")
    except FormatError as exc:
        raise UsageError(f"cannot trace this program: {exc}") from exc
    gen = generator.generate([model_input], beam=beam, max_length=max_length, names=names, values=values,
                             exception_bias=exception_bias, exception_at=exception_at)[0]
    limit = generator.model.config.max_trace_length
    parsed = generator.parse(gen.text)
    steps = [s for s in parsed.steps]
    if offset:  # back to the program's own line numbers
        from codeexecutor.execution.records import Step

        steps = [Step(s.line - offset, s.state, s.output) for s in steps if s.line > offset]
    error = None
    if parsed.exception:
        line = (parsed.exception_line - offset) if parsed.exception_line else (steps[-1].line if steps else None)
        error = {"type": parsed.exception, "line": line}
    report = {
        "steps": [s.to_json() for s in steps],
        "output": "".join(s.output for s in steps),
        "error": error,
        "logprob": gen.logprob,
        "finished": gen.finished,
        "exception_bias": exception_bias,
        "exception_at": exception_at,
        "constrained": {"names": names, "values": values},
        "crash_margin": finite_margin(gen.exception_peak),  # generation/verdict.py
        "length_cap": min(max_length or limit, limit),
        "model_limit": limit,
        "generated": gen.text,  # whole states (a compact model's text expanded)
        **({"generated_compact": gen.compact} if gen.compact is not None else {}),
        "problems": parsed.problems,
        "notes": notes,
        "code": code,
        "model_input": model_input,
        "format_profile": generator.profile.label,
    }
    truth = None
    if compare:
        from codeexecutor.execution import execute

        truth = execute(code)
        report["ground_truth"] = truth.to_json()
    report["text"] = format_report(code.splitlines(), report, offset)
    if html_out:
        from codeexecutor.generation.html import render_html

        tmp = html_out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(render_html(code, report, truth, offset))
        os.replace(tmp, html_out)
    return report


def format_report(lines: list[str], report: dict, offset: int = 0) -> str:
    out = []
    for i, step in enumerate(report["steps"], 1):
        k = step["line"] + offset
        code = lines[k - 1].strip() if 0 < k <= len(lines) else "?"
        state = ", ".join(f"{n}={v}" for n, v in step["state"].items())
        out.append(f"{i:>4}  {step['line']:>4} | {code[:36]:<36} | {state[:90]}")
        for text in step["output"].splitlines():
            out.append(f"{'':>4}  {'':>4} | {'':<36} > {text}")
    out.append(f"predicted output: {report['output']!r}")
    err = report["error"]
    if err:
        out.append(f"predicted runtime error: {err['type']} at line {err['line']}")
    elif report.get("finished", True):
        out.append("predicted runtime error: none")
    else:
        out.append("predicted runtime error: unknown (the trace is unfinished)")
    if not report.get("finished", True):
        out.append(f"warning: the trace hit the length cap ({report['length_cap']} tokens) before it ended (a value "
                   "repeated in a loop, or a long run); its output is partial"
                   + ("." if report.get("length_cap") == report.get("model_limit") else "; --max-length raises the cap."))
    if report.get("ground_truth"):
        gt = report["ground_truth"]
        gerr = gt["error"]
        out.append(f"real run: {gt['status']}, output {gt['stdout']!r}" + (f", {gerr['type']} at line {gerr['line']}" if gerr else ""))
    if report["problems"]:
        out.append(f"unparsed parts of the generation: {len(report['problems'])} (see --json)")
    out.append(f"sequence log-probability: {report['logprob']:.3f}")
    return "\n".join(out)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", nargs="?", help="Python 3 source file")
    p.add_argument("--stdin", metavar="FILE", help="its input (inlined before the model sees the program)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model folder or hub id (default {DEFAULT_MODEL}, made by `make demo`)")
    p.add_argument("--beam", type=int, default=10)
    p.add_argument("--max-length", type=int, help="trace tokens to generate at most (default and cap: the model's, 768)")
    p.add_argument("--constrain-names", action="store_true", help="states may only name the program's identifiers "
                   "(stops a small model's name loops; not in the release's decoding)")
    p.add_argument("--constrain-values", action="store_true", help="a value ends at the tracer's length limit (100 "
                   "characters, then '...'; stops a small model's growing-value loops; not in the release's decoding)")
    p.add_argument("--exception-bias", type=float, default=0.0, metavar="B",
                   help="favour <exception> by B nats where a step may end (a model that ranks the crash second "
                        "reports it; not in the release's decoding)")
    p.add_argument("--exception-at", choices=("step", "end"), default="step",
                   help="where the bias acts: every step end, or only where the trace would end (</s>)")
    p.add_argument("--json", action="store_true", help="print the JSON report")
    p.add_argument("--html", metavar="OUT", help="write an HTML view of the trace")
    p.add_argument("--compare", action="store_true", help="also run the program in the sandbox and show the real trace "
                   "beside the predicted one (without it, nothing is run)")
    p.add_argument("--docstring", metavar="FILE", help="resource description (input spec) prepended as a docstring")
    p.add_argument("--batch", metavar="FILE.jsonl", help="many programs: lines of {\"code\", \"stdin\"?, \"id\"?}; JSON lines out")


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.source import read_program, read_text_file

    if args.beam < 1 or (args.max_length is not None and args.max_length < 1):
        raise UsageError("--beam and --max-length must be >= 1")
    doc = read_text_file(args.docstring, "docstring file") if args.docstring else None
    if args.batch:
        text = read_text_file(args.batch, "batch file")
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                code = item["code"]
            except (ValueError, KeyError, TypeError) as exc:
                raise UsageError(f"{args.batch}:{n}: expected a JSON object with a \"code\" field ({exc})") from exc
            rep = trace_program(code, item.get("stdin", ""), args.model, args.beam, args.max_length, args.compare, None, doc,
                                args.constrain_names, args.exception_bias, args.constrain_values, args.exception_at)
            rep.pop("text")
            print(json.dumps({"id": item.get("id", n), **rep}, ensure_ascii=False), flush=True)
        return 0
    if not args.program:
        raise UsageError("give a PROGRAM (or --batch FILE.jsonl)")
    source = read_program(args.program)
    stdin = read_text_file(args.stdin, "stdin file") if args.stdin else ""
    report = trace_program(source, stdin, args.model, args.beam, args.max_length, args.compare, args.html, doc,
                           args.constrain_names, args.exception_bias, args.constrain_values, args.exception_at)
    text = report.pop("text")
    print(json.dumps(report, ensure_ascii=False) if args.json else text)
    return 0


register("trace", "predict a program's execution trace, output and runtime error with a trained model", _args, _run)
