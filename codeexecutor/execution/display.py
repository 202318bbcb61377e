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
