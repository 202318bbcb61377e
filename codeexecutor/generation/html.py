"""The HTML view of a predicted trace, beside the real one when it was run (`trace --html`)."""

from __future__ import annotations

import html

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.2em} table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f0f0f0} td.code{font-family:monospace;white-space:pre}
td.state{font-family:monospace;white-space:pre-wrap;max-width:38em}
tr.diff td{background:#ffe3e3} tr.same td.gt{color:#666}
.badge{display:inline-block;padding:2px 8px;border-radius:4px;margin-right:8px}
.err{background:#ffd6d6} .ok{background:#d9f5d9} .out{font-family:monospace;white-space:pre;background:#f7f7f7;padding:6px}
"""


def _state(step: dict | None) -> str:
    if step is None:
        return ""
    s = "\n".join(f"{n} : {v}" for n, v in step["state"].items())
    if step.get("output"):
        s += ("\n" if s else "") + f">>> {step['output']!r}"
    return html.escape(s)


def render_html(code: str, report: dict, truth=None, offset: int = 0) -> str:
    lines = code.splitlines()
    pred = report["steps"]
    real = [s.to_json() for s in truth.steps] if truth is not None else None
    n = max(len(pred), len(real) if real else 0)
    rows = []
    differing = 0
    for i in range(n):
        p = pred[i] if i < len(pred) else None
        r = real[i] if real and i < len(real) else None
        diff = real is not None and (p is None or r is None or p["line"] != r["line"] or p["state"] != r["state"] or p["output"] != r["output"])
        differing += diff
        anchor = p or r
        k = anchor["line"] + offset
        src = html.escape(lines[k - 1]) if 0 < k <= len(lines) else ""
        cells = [f"<td>{i + 1}</td>", f"<td>{anchor['line']}</td>", f"<td class='code'>{src}</td>",
                 f"<td class='state'>{_state(p)}</td>"]
        if real is not None:
            where = ""
            if r is not None and p is not None and r["line"] != p["line"]:
                rk = r["line"] + offset
                rsrc = lines[rk - 1].strip() if 0 < rk <= len(lines) else ""
                where = f"<b>line {r['line']}: {html.escape(rsrc)}</b>\n"
            cells.append(f"<td class='state gt'>{where}{_state(r)}</td>")
        rows.append(f"<tr class='{'diff' if diff else 'same'}'>{''.join(cells)}</tr>")
    err = report["error"]
    badges = [f"<span class='badge {'err' if err else 'ok'}'>predicted: {html.escape(err['type'] + ' at line ' + str(err['line'])) if err else 'no runtime error'}</span>"]
    if truth is not None:
        terr = truth.error
        badges.append(f"<span class='badge {'err' if terr else 'ok'}'>real run: {html.escape(truth.status.value)}"
                      f"{html.escape(f', {terr.type} at line {terr.line}') if terr else ''}</span>")
        badges.append(f"<span class='badge'>{differing} of {n} steps differ</span>")
    head = "<tr><th>#</th><th>line</th><th>source</th><th>predicted state</th>" + ("<th>real state</th>" if real is not None else "") + "</tr>"
    source = "\n".join(f"{i + 1:>3}  {html.escape(l)}" for i, l in enumerate(lines))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>codeexecutor trace</title><style>{_CSS}</style></head>
<body><h1>Predicted execution trace</h1><p>{''.join(badges)}</p>
<h2>Predicted output</h2><div class="out">{html.escape(report['output']) or '(none)'}</div>
<h2>Steps</h2><table id="steps">{head}{''.join(rows)}</table>
<h2>Program (as the model sees it)</h2><div class="out">{source}</div>
<p>sequence log-probability {report['logprob']:.3f}</p></body></html>
"""
