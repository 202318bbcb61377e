"""The trace viewer: one self-contained HTML page per trace, and an index of many.

A page shows the program with line numbers and steps through the predicted execution: the
line that ran marked (and the next one), buttons, a slider and the arrow keys to move,
a click on a line (or `n`) to jump to that line's next visit, the function the step is in,
the state with the names that changed since the step before marked, the output printed so
far, and the runtime error at its line where the trace ends in one. Given the real run
(`trace --compare`, or the reference trace in `evaluate --html`), both states stand side
by side, names that differ marked, the first step where the two part marked on the slider
and one key (`d`) away, with a summary line above.

The page needs no network: the style and script are inlined from `static/`, and the trace
travels as JSON in a `<script type="application/json">` element with `<`, `>` and `&`
escaped, which the script reads and writes into the page as text, so program text and
values never become markup.
"""

from __future__ import annotations

import html
import json
import os
import pathlib
from dataclasses import dataclass

from codeexecutor.atomic import write_text
from codeexecutor.modeling.compact import frames

STATIC = pathlib.Path(__file__).resolve().parent / "static"


def functions_of(code: str) -> dict[int, str]:
    """1-based line -> the function (or class body) it runs in, qualified (`Tree.insert`);
    lines at module level are absent (modeling/compact.frames)."""
    return {line: name for line, (_, name) in frames(code).items()}


def first_divergence(pred: list[dict], real: list[dict]) -> int | None:
    """Index of the first step where the two traces part (line, state or output differ, or
    one has ended); None when they are the same."""
    for i in range(max(len(pred), len(real))):
        if i >= len(pred) or i >= len(real):
            return i
        p, r = pred[i], real[i]
        if p["line"] != r["line"] or dict(p["state"]) != dict(r["state"]) or p.get("output", "") != r.get("output", ""):
            return i
    return None


def _side(label: str, steps: list[dict], error: dict | None, finished: bool = True, status: str | None = None) -> dict:
    return {
        "label": label,
        "steps": [{"line": s["line"], "state": dict(s["state"]), "output": s.get("output", "")} for s in steps],
        "error": {"type": error["type"], "line": error.get("line")} if error else None,
        "finished": finished,
        "status": status,
    }


@dataclass
class Side:
    """One trace a page shows: its steps ({line, state, output} dicts, 1-based lines of
    the code), its runtime error ({type, line}) if any, whether it finished (a prediction
    stopped by its length cap did not), how the run ended (`ok`, `error`, ...) and its
    heading (default: `predicted` for the prediction, `real run` for the other side)."""

    steps: list[dict]
    error: dict | None = None
    finished: bool = True
    status: str | None = None
    label: str = ""


def page_data(code: str, pred: Side, real: Side | None = None, title: str = "", cap: int | None = None) -> dict:
    """What a page shows, as plain data: the prediction beside the real run (or a
    reference), with its summary: steps of each side, the first divergence (1-based),
    whether output and runtime error agree, and `score`, the share of steps that agree
    before the traces part (1.0: the same trace). `cap`: the prediction's length cap."""
    finished = pred.finished
    pred = _side(pred.label or "predicted", pred.steps, pred.error, finished)
    if real is not None:
        real = _side(real.label or "real run", real.steps, real.error, True, real.status)
    summary = {"predicted_steps": len(pred["steps"]), "finished": finished, "length_cap": cap}
    div = None
    if real is not None:
        div = first_divergence(pred["steps"], real["steps"])

        def out(side):
            return "".join(st["output"] for st in side["steps"])

        def err(side):
            return (side["error"] or {}).get("type"), (side["error"] or {}).get("line")

        agree = len(real["steps"]) if div is None else div  # real steps matched before the traces part
        summary.update(
            real_steps=len(real["steps"]),
            first_divergence=None if div is None else div + 1,
            same_trace=div is None,
            output_equal=out(pred) == out(real),
            error_equal=err(pred) == err(real),
            score=round(agree / max(1, len(real["steps"]), len(pred["steps"])), 3),
        )
    return {
        "title": title,
        "code": code.splitlines(),
        "functions": {str(k): v for k, v in functions_of(code).items()},
        "pred": pred,
        "real": real,
        "first_divergence": div,
        "summary": summary,
    }


def _json_for_script(data: dict) -> str:
    text = json.dumps(data, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _badges(data: dict) -> str:
    s, out = data["summary"], []
    pred, real = data["pred"], data["real"]
    perr = pred["error"]
    out.append(
        (
            "bad" if perr else "good",
            "predicted: "
            + (
                f"{perr['type']} at line {perr['line']}"
                if perr
                else "no runtime error"
                if pred["finished"]
                else "no verdict"
            ),
        )
    )
    if real is not None:
        rerr = real["error"]
        out.append(
            (
                "bad" if rerr else "good",
                f"{real['label']}: "
                + (real["status"] + ", " if real["status"] else "")
                + (f"{rerr['type']} at line {rerr['line']}" if rerr else "no runtime error"),
            )
        )
        out.append(("", f"{s['predicted_steps']} predicted / {s['real_steps']} real steps"))
        out.append(
            ("good", "same trace") if s["same_trace"] else ("bad", f"first divergence: step {s['first_divergence']}")
        )
        out.append(("good" if s["output_equal"] else "bad", "output " + ("equal" if s["output_equal"] else "differs")))
        out.append(("good" if s["error_equal"] else "bad", "error " + ("equal" if s["error_equal"] else "differs")))
    else:
        out.append(("", f"{s['predicted_steps']} predicted steps"))
    if not pred["finished"]:
        cap = f" ({s['length_cap']} tokens)" if s.get("length_cap") else ""
        out.append(("warn", f"the prediction hit the length cap{cap}: its last steps, output and verdict are missing"))
    return "".join(f"<span class='badge {c}'>{html.escape(t)}</span>" for c, t in out)


def _injections(injections: list[dict] | None) -> str:
    """The values a guided run injected (docs/guided-execution.md), as a table; their lines
    are marked in the program by the script."""
    if not injections:
        return ""
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                i["line"],
                i["use"],
                i["name"],
                i["kind"],
                "" if i["value"] is None else i["value"],
                f"{i['p']:.2f}",
            )
        )
        + "</tr>"
        for i in injections
    )
    head = "".join(f"<th>{h}</th>" for h in ("line", "use", "name", "kind", "value", "p"))
    return (
        "<div id='injections'><h2>Values injected into the real run</h2>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def render_page(data: dict) -> str:
    """One self-contained HTML page for a trace (`page_data`)."""
    css, js = (STATIC / "viewer.css").read_text(), (STATIC / "viewer.js").read_text()
    real = data["real"] is not None
    head = (
        "<tr><th>name</th><th>predicted</th>"
        + (f"<th>{html.escape(data['real']['label'])}</th>" if real else "")
        + "</tr>"
    )
    outputs = "<div><h2>Predicted output so far</h2><div class='out' id='out-pred'></div></div>"
    if real:
        outputs += (
            f"<div><h2>{html.escape(data['real']['label'].capitalize())} output so far</h2>"
            "<div class='out' id='out-real'></div></div>"
        )
    title = html.escape(data["title"] or "codeexecutor trace")
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{css}</style></head>
<body><header><h1>{title}</h1><div id="summary">{_badges(data)}</div></header>
<main><section id="left"><h2>Program</h2><div id="program"></div></section>
<section id="right">
<div id="controls"><button id="first" title="Home">&#x25C0;&#x25C0; First</button><button id="prev" title="&#x2190;">&#x25C0; Prev</button>
<button id="next" title="&#x2192;">Next &#x25B6;</button><button id="last" title="End">Last &#x25B6;&#x25B6;</button>
<button id="todiv" title="d">First divergence</button>
<span id="slider-wrap"><input type="range" id="slider" min="0" max="0" value="0" aria-label="step"><span id="divtick"></span></span></div>
<div><span id="pos"></span> <span id="diverged">&#x2190; the traces part here</span></div>
<p class="keys">&#x2190; / &#x2192; step, Home / End, d: first divergence, n or a click on a line: that line's next visit</p>
<h2>Function</h2><div id="frame"></div>
<h2>State after the line (changed names highlighted)</h2><table id="states"><thead>{head}</thead><tbody></tbody></table>
<div id="error"></div>
<div id="outputs">{outputs}</div>
{_injections(data.get("injections"))}
</section></main>
<script type="application/json" id="trace-data">{_json_for_script(data)}</script>
<script>{js}</script></body></html>
"""  # noqa: E501  (the page's HTML: long lines kept as the page has them)


def report_page(code: str, report: dict, truth=None, offset: int = 0, title: str = "") -> dict:
    """`page_data` of a `trace` report (its steps already in the program's own lines) and
    the real run of the same code (`offset` docstring lines before the program)."""
    real_steps = real_error = status = None
    if truth is not None:
        real_steps = [
            {"line": s.line - offset, "state": dict(s.state), "output": s.output}
            for s in truth.steps
            if s.line > offset
        ]
        status = truth.status.value
        if truth.error is not None:
            real_error = {"type": truth.error.type, "line": truth.error.line - offset if truth.error.line else None}
    program = "\n".join(code.splitlines()[offset:])
    pred = Side(report["steps"], report["error"], report.get("finished", True))
    real = Side(real_steps, real_error, status=status) if real_steps is not None else None
    return page_data(program, pred, real, title, report.get("length_cap"))


def page_name(key) -> str:
    """A file name for an example's page from its id (anything unsafe replaced)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(key))[:80]
    return (safe or "trace") + ".html"


INDEX_COLUMNS = (
    "id",
    "dataset",
    "predicted_steps",
    "real_steps",
    "first_divergence",
    "same_trace",
    "output_equal",
    "error_equal",
    "finished",
    "score",
)


def render_index(rows: list[dict], title: str = "codeexecutor traces") -> str:
    """A page listing the pages (`rows`: {"page", "id", and summary fields}), its table
    sortable by any column (click a header), worst first by default where scores exist."""
    cols = [c for c in INDEX_COLUMNS if any(c in r for r in rows)]
    fmt = lambda v: "" if v is None else ("yes" if v is True else "no" if v is False else str(v))  # noqa: E731
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            key = "" if v is None else str(int(v) if isinstance(v, bool) else v)
            text = (
                f"<a href='{html.escape(r['page'], quote=True)}'>{html.escape(fmt(v))}</a>"
                if c == "id"
                else html.escape(fmt(v))
            )
            cells.append(f"<td data-key='{html.escape(key, quote=True)}'>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th data-col='{i}'>{html.escape(c.replace('_', ' '))}</th>" for i, c in enumerate(cols))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>
body{{font-family:system-ui,sans-serif;margin:16px}} table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ddd;padding:3px 8px;text-align:left}} th{{background:#f0f0f0;cursor:pointer}}
th.asc::after{{content:" \\25B2"}} th.desc::after{{content:" \\25BC"}}</style></head>
<body><h1>{html.escape(title)}</h1><p>{len(rows)} traces; click a column to sort by it.</p>
<table id="index"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>
<script>
(function () {{
  const table = document.getElementById("index"), tbody = table.tBodies[0];
  function key(td) {{ const k = td.dataset.key; const x = Number(k); return k !== "" && !isNaN(x) ? x : k; }}
  function sort(th, dir) {{
    const i = Number(th.dataset.col);
    const rows = Array.from(tbody.rows);
    rows.sort((a, b) => {{ const x = key(a.cells[i]), y = key(b.cells[i]);
      return (x === y ? 0 : (typeof x === typeof y ? (x < y ? -1 : 1) : (typeof x === "number" ? -1 : 1))) * dir; }});
    rows.forEach(r => tbody.append(r));
    for (const h of table.tHead.rows[0].cells) h.classList.remove("asc", "desc");
    th.classList.add(dir > 0 ? "asc" : "desc");
  }}
  for (const th of table.tHead.rows[0].cells) th.addEventListener("click", () => sort(th, th.classList.contains("asc") ? -1 : 1));
  const score = Array.from(table.tHead.rows[0].cells).find(h => h.textContent === "score");
  if (score) sort(score, 1);
}})();
</script></body></html>
"""  # noqa: E501  (the index page's HTML and script, kept as written)


def write_pages(out_dir: str, pages: list[tuple[str, dict, dict]], title: str = "codeexecutor traces") -> str:
    """Write one page per (id, page data, extra index fields) and index.html into
    `out_dir`; returns the index's path."""
    os.makedirs(out_dir, exist_ok=True)
    rows, used = [], set()
    for key, data, extra in pages:
        name = page_name(key)
        while name in used:
            name = name[:-5] + "_.html"
        used.add(name)
        write_text(os.path.join(out_dir, name), render_page(data))
        rows.append({"page": name, "id": key, **data["summary"], **extra})
    index = os.path.join(out_dir, "index.html")
    write_text(index, render_index(rows, title))
    return index
