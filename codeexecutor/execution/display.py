"""Readable text form of a trace: each executed source line beside the state after it."""

from __future__ import annotations

from codeexecutor.execution.records import ExecResult


def format_state(state: dict[str, str], width: int = 80) -> str:
    text = ", ".join(f"{k}={v}" for k, v in state.items())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_result(source: str, result: ExecResult, code_width: int = 36) -> str:
    lines = source.splitlines()
    out = []
    for i, step in enumerate(result.steps, 1):
        code = lines[step.line - 1].strip() if 0 < step.line <= len(lines) else ""
        if len(code) > code_width:
            code = code[: code_width - 3] + "..."
        out.append(f"{i:>5}  {step.line:>4} | {code:<{code_width}} | {format_state(dict(step.state))}")
        for text in step.output.splitlines():
            out.append(f"{'':>5}  {'':>4} | {'':<{code_width}} > {text}")
    out.append(f"status: {result.status}   steps: {len(result.steps)}")
    if result.error:
        where = f" at line {result.error.line}" if result.error.line else ""
        out.append(f"error: {result.error.type}{where}: {result.error.message}")
    return "\n".join(out)


def format_guided(source: str, run) -> str:
    """A guided run (guided.GuidedRun): its trace, then each injection (its line, use, name,
    kind, literal and probability) and the code lines covered."""
    text = format_result(source, run.result)
    out = [text, f"injected ({run.predictor}, {run.runs} runs, {run.tries} tries):"]
    for inj in run.injections:
        where = f"line {inj.line}" if inj.line else "setup"
        value = f" = {inj.value}" if inj.value is not None else ""
        out.append(f"  {where:>8}  {inj.use:<9} {inj.name:<20} {inj.kind}{value}  (p={inj.p:.2f})")
    if not run.injections:
        out.append("  nothing: the program lacked no value")
    code = sum(1 for t in source.splitlines() if t.strip() and not t.strip().startswith("#"))
    out.append(f"covered: {len(run.covered_lines)} of {code} code lines ran to their end")
    return "\n".join(out)
