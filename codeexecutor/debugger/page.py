"""A debugger session in the trace viewer (generation/html.py): one viewer step an action.

Each action that lands (`s`, `n`, `r`, `c`) is a step of the page: the model's landing on the
predicted side, the real run's landing beside it (where the walk was real), the command that
took it above the state, and the breakpoints in the title. The outputs shown are those
printed at the landings, not the whole run's. The slider then walks the
session as it was taken, and the page's first divergence is the first action whose answer
parts from the real one.
"""

from __future__ import annotations

NO_EVENT = {"line": 0, "state": {}, "output": ""}  # an action whose trace ended before it landed


def session_page(code: str, taken: list[tuple[str, dict]], breakpoints, title: str) -> dict:
    """`page_data` of the actions `taken` ((command, answer) pairs, in order) on `code`."""
    from codeexecutor.generation.html import Side, page_data

    landed = [(c, a) for c, a in taken if "predicted" in a]
    real = any(a.get("real") is not None for _, a in landed)

    def step(event: dict | None) -> dict:
        return (
            {"line": event["line"], "state": event["state"], "output": event.get("output", "")}
            if event
            else dict(NO_EVENT)
        )

    marks = ", ".join(str(b) for b in sorted(breakpoints))
    data = page_data(
        code,
        Side([step(a["predicted"]) for _, a in landed]),
        Side([step(a.get("real")) for _, a in landed]) if real else None,
        title=title + (f" (breakpoints: {marks})" if marks else ""),
    )
    data["labels"] = [f"{c.strip()} → {a['action']}" for c, a in landed]
    return data
