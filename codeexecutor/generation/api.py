"""The public API of `codeexecutor trace`: predict programs' traces, output and runtime
error with a model, one program (`trace_program`) or many decoded in batches
(`trace_programs`), with the readable text form and the HTML viewer (generation/html.py)."""

from __future__ import annotations

from codeexecutor.errors import UsageError
from codeexecutor.generation.decoding import MODEL_DEFAULTS, Decoding
from codeexecutor.modeling.shipped import default_model

DEFAULT_MODEL = default_model()  # the best shipped trace model (modeling/shipped.py)


_GENERATORS: dict = {}


def cached_generator(model: str):
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


HYPOTHESES_PER_BATCH = 64  # rows a batched decode holds: 64 programs greedy, 6 at the release's beam of 10


def programs_per_batch(beam: int) -> int:
    """How many programs a batch decodes together at this beam (`--batch-size`'s default)."""
    return max(1, HYPOTHESES_PER_BATCH // max(1, beam))


def trace_program(
    source: str,
    stdin: str = "",
    model: str = DEFAULT_MODEL,
    decoding: Decoding = MODEL_DEFAULTS,
    compare: bool = False,
    html_out: str | None = None,
    docstring: str | None = None,
) -> dict:
    """Predict one program's trace; returns the JSON report (plus 'text', the readable
    form). `html_out`: write the viewer page there (generation/html.py)."""
    from codeexecutor.modeling.format import FormatError

    try:
        (report,) = trace_programs(
            [{"code": source, "stdin": stdin}], model, decoding, compare, docstring, strict=True, pages=bool(html_out)
        )
    except FormatError as exc:
        raise UsageError(f"cannot trace this program: {exc}") from exc
    if html_out:
        from codeexecutor.atomic import write_text
        from codeexecutor.generation.html import render_page

        write_text(html_out, render_page(report.pop("_page")))
    report.pop("_page", None)
    return report


def interpreter_note(config, data_python: str | None = None) -> str | None:
    """A note where the interpreter of the model's training traces (`trace_python` in its
    config) is not the one the model is now compared with: this run's, or `data_python`
    (a test set's build). Traces agree on 3.11, 3.12 and 3.13 (docs/sandbox.md), so it
    says so rather than warns."""
    import sys

    trained = getattr(config, "trace_python", None)
    now = data_python or "{}.{}".format(*sys.version_info[:2])
    if not trained or trained == now:
        return None
    where = f"the test data was traced by Python {now}" if data_python else f"this run is Python {now}"
    return (
        f"the model learned traces made by Python {trained} and {where}: the tracer gives the same traces on "
        "3.11, 3.12 and 3.13 (docs/sandbox.md)"
    )


def trace_programs(
    programs: list[dict],
    model: str = DEFAULT_MODEL,
    decoding: Decoding = MODEL_DEFAULTS,
    compare: bool = False,
    docstring: str | None = None,
    batch_size: int | None = None,
    strict: bool = False,
    pages: bool = False,
) -> list[dict]:
    """Predict the traces of many programs ({"code", "stdin"?, "id"?}), decoded in batches
    of `batch_size` as `evaluate` does. Each report is `trace_program`'s; with `pages`,
    plus `_page`, the viewer's data (generation/html.py page_data). A program the model
    format cannot take (over 200 lines) gets {"problem": why} instead (with `strict`,
    FormatError). The decoding's `None` fields are the model's defaults
    (`Decoding.resolved`: the state rules where they apply, which cut fewer traces at the
    length cap at no measured cost, experiments/NOTEBOOK.md)."""
    from codeexecutor.generation.answers import generate_answers
    from codeexecutor.generation.html import report_page

    generator = cached_generator(model)
    decoding = decoding.resolved(generator)
    prepared, inputs, skipped = _model_inputs(generator, programs, docstring, strict)
    batch_size = batch_size or programs_per_batch(decoding.beam)
    gens = generate_answers(generator, inputs, decoding, batch_size, progress=False)
    detector = generator.detector
    if detector is not None:
        verdicts = detector.predict([code for _, code, _, _ in prepared], [offset for _, _, offset, _ in prepared])
    else:
        verdicts = [None] * len(inputs)
    limit = generator.model.config.max_trace_length
    settings = {
        "beam": decoding.beam,
        "exception_bias": decoding.exception_bias,
        "exception_at": decoding.exception_at,
        "length_penalty": decoding.length_penalty,
        "constrained": {"names": decoding.names, "values": decoding.values},
        "length_cap": min(decoding.max_length or limit, limit),
        "model_limit": limit,
        "format_profile": generator.profile.label,
        "step_order": generator.profile.order,
    }
    reports: list[dict] = [{"problem": skipped[i]} if i in skipped else {} for i in range(len(programs))]
    truths = _run_all([code for _, code, _, _ in prepared]) if compare else [None] * len(prepared)
    mismatch = interpreter_note(generator.model.config) if compare else None
    if mismatch:
        prepared = [(i, code, offset, notes + [mismatch]) for i, code, offset, notes in prepared]
    if compare and generator.profile.order == "end":  # the real trace in the order the model writes steps
        truths = [_finish_ordered(t) for t in truths]
    for (i, code, offset, notes), model_input, gen, truth, verdict in zip(prepared, inputs, gens, truths, verdicts):
        report = _report(generator, gen, code, offset, notes, model_input, settings, verdict)
        if truth is not None:
            report["ground_truth"] = truth.to_json()
        report["text"] = format_report(code.splitlines(), report, offset)
        if pages:
            title = "Predicted execution trace" + (f" of {programs[i]['id']}" if "id" in programs[i] else "")
            report["_page"] = report_page(code, report, truth, offset, title=title)
        reports[i] = report
    return reports


def _model_inputs(generator, programs: list[dict], docstring: str | None, strict: bool):
    """(each readable program as (index, code, line offset, notes), the model's inputs, the
    problems of those the format cannot take by index). A note names the lines a program's
    code window leaves unread."""
    from codeexecutor.modeling.format import FormatError

    prepared, inputs, skipped = [], [], {}
    for i, item in enumerate(programs):
        code, offset, notes = prepare(item["code"], item.get("stdin", ""), docstring)
        try:
            inputs.append(generator.code_input(code, "codenet"))
        except FormatError as exc:
            if strict:
                raise
            skipped[i] = str(exc)
            continue
        n, unseen = generator.encoder.unseen_lines(inputs[-1])
        unseen = [k + 1 - offset for k in unseen if k >= offset]  # the user's 1-based lines
        if unseen:
            notes = notes + [
                f"the program is {n} code tokens and the model reads {generator.encoder.code_body} "
                f"(code_window {generator.profile.window}): lines {_spans(unseen)} are predicted without "
                "being read"
            ]
        prepared.append((i, code, offset, notes))
    return prepared, inputs, skipped


def _spans(lines: list[int]) -> str:
    """1-based line numbers as runs: [3, 4, 5, 9] -> '3-5, 9'."""
    runs: list[list[int]] = []
    for k in lines:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _finish_ordered(result):
    from dataclasses import replace

    from codeexecutor.execution import ExecStatus
    from codeexecutor.modeling.format import finish_order

    crashed = result.error is not None and result.status in (ExecStatus.ERROR, ExecStatus.MEMORY)
    return replace(result, steps=tuple(finish_order(result.steps, crashed)))


def _run_all(codes: list[str]) -> list:
    """The real runs of the programs, in the sandbox."""
    from codeexecutor.execution import ExecutorPool, Program

    with ExecutorPool(workers=min(2, max(1, len(codes)))) as pool:
        results = dict(pool.execute_many(Program(code, "", i) for i, code in enumerate(codes)))
    return [results[i] for i in range(len(codes))]


def _report(generator, gen, code: str, offset: int, notes, model_input: str, settings: dict, verdict=None) -> dict:
    parsed = generator.parse(gen.text)
    from codeexecutor.generation.verdict import finite_margin  # torch: imported where a model runs

    steps = list(parsed.steps)
    n_lines = len(code.splitlines()) - offset
    if offset:  # back to the program's own line numbers
        from codeexecutor.execution.records import Step

        steps = [Step(s.line - offset, s.state, s.output) for s in steps if s.line > offset]
    problems = list(parsed.problems)
    if any(not 1 <= s.line <= n_lines for s in steps):  # a step at a line the program does not have
        problems.append(f"{sum(not 1 <= s.line <= n_lines for s in steps)} steps named lines past the program's end")
        steps = [s for s in steps if 1 <= s.line <= n_lines]
    trace_error = None
    if parsed.exception:
        line = (parsed.exception_line - offset) if parsed.exception_line else (steps[-1].line if steps else None)
        trace_error = {"type": parsed.exception, "line": line if line is not None and 1 <= line <= n_lines else None}
    error, agreement = one_verdict(trace_error, verdict, offset, gen.finished)
    return {
        "steps": [s.to_json() for s in steps],
        "output": "".join(s.output for s in steps),
        "error": error,
        "trace_error": trace_error,
        "crash_probability": round(verdict.probability, 4) if verdict is not None else None,
        "verdict": verdict.source if verdict is not None else "trace",
        "logprob": gen.logprob,
        "finished": gen.finished,
        "crash_margin": finite_margin(gen.exception_peak),  # generation/verdict.py
        **settings,
        "generated": gen.text,  # whole states (a compact model's text expanded)
        **({"generated_compact": gen.compact} if gen.compact is not None else {}),
        "problems": problems,
        "notes": notes + ([agreement] if agreement else []),
        "code": code,
        "model_input": model_input,
    }


def one_verdict(trace_error: dict | None, verdict, offset: int, finished: bool) -> tuple[dict | None, str | None]:
    """The report's runtime error and, where the trace says otherwise, a note naming the
    disagreement. With a crash detector beside the model (modeling/detector.py), its
    verdict is the report's: it reads the whole program, where the trace crashes only if
    every step before the crash is right; without one, the trace's own `<exception>`."""
    if verdict is None:
        return trace_error, None
    error = None
    if verdict.crashed:
        line = verdict.line - offset if verdict.line and verdict.line > offset else None
        error = {"type": verdict.type, "line": line, "probability": round(verdict.probability, 4)}
    if error is None and trace_error is None:
        return None, None
    if (
        error is not None
        and trace_error is not None
        and (trace_error["line"], trace_error["type"])
        == (
            error["line"],
            error["type"],
        )
    ):
        return error, None
    said = (
        f"{trace_error['type']} at line {trace_error['line']}"
        if trace_error
        else ("no crash" if finished else "no crash before the length cap")
    )
    found = f"{error['type']} at line {error['line']}" if error else "no crash"
    who = "the interpreter's check finds" if verdict.source == "interpreter" else "the crash detector predicts"
    return error, (
        f"{who} {found} (crash probability {verdict.probability:.2f}) and the trace "
        f"shows {said}: the verdict is the {'check' if verdict.source == 'interpreter' else 'detector'}'s"
    )


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
        sure = f" (probability {err['probability']:.2f})" if err.get("probability") is not None else ""
        out.append(f"predicted runtime error: {err['type']} at line {err['line']}{sure}")
    elif report.get("crash_probability") is not None:
        out.append(f"predicted runtime error: none (crash probability {report['crash_probability']:.2f})")
    elif report.get("finished", True):
        out.append("predicted runtime error: none")
    else:
        out.append("predicted runtime error: unknown (the trace is unfinished)")
    if not report.get("finished", True):
        out.append(
            f"warning: the trace hit the length cap ({report['length_cap']} tokens) before it ended (a value "
            "repeated in a loop, or a long run); its output is partial"
            + ("." if report.get("length_cap") == report.get("model_limit") else "; --max-length raises the cap.")
        )
    if report.get("ground_truth"):
        gt = report["ground_truth"]
        gerr = gt["error"]
        out.append(
            f"real run: {gt['status']}, output {gt['stdout']!r}"
            + (f", {gerr['type']} at line {gerr['line']}" if gerr else "")
        )
    if report["problems"]:
        out.append(f"unparsed parts of the generation: {len(report['problems'])} (see --json)")
    out.append(f"sequence log-probability: {report['logprob']:.3f}")
    return "\n".join(out)
