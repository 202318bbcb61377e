"""The trace viewer (generation/html.py) as a person uses it: pages opened in headless
Debian chromium (driven by Playwright), stepped through by keyboard, read through the DOM."""

import json
import shutil
import subprocess
import sys

import pytest

from codeexecutor.generation.html import Side, first_divergence, functions_of, page_data, render_page, write_pages

from .conftest import ROOT

CHROMIUM = shutil.which("chromium")
LOOP = "def square(v):\n    return v * v\ntotal = 0\nfor i in range(3):\n    total += square(i)\nprint(total)\n"


def steps(*items):
    return [{"line": line, "state": state, "output": out} for line, state, out in items]


REAL = steps(
    (1, {"square": "<function>"}, ""),
    (3, {"square": "<function>", "total": "0"}, ""),
    (4, {"square": "<function>", "total": "0", "i": "0"}, ""),
    (2, {"v": "0"}, ""),
    (5, {"square": "<function>", "total": "0", "i": "0"}, ""),
    (4, {"square": "<function>", "total": "0", "i": "1"}, ""),
    (2, {"v": "1"}, ""),
    (5, {"square": "<function>", "total": "1", "i": "1"}, ""),
)
PRED = REAL[:5] + steps(
    (4, {"square": "<function>", "total": "0", "i": "1"}, ""),
    (2, {"v": "1"}, ""),
    (5, {"square": "<function>", "total": "2", "i": "1"}, "2\n"),
)


def test_page_data_summary_and_divergence():
    data = page_data(LOOP, Side(PRED), Side(REAL, status="ok"), "loop")
    s = data["summary"]
    assert first_divergence(PRED, REAL) == 7 and s["first_divergence"] == 8 and not s["same_trace"]
    assert s["output_equal"] is False and s["error_equal"] is True and s["score"] == round(7 / 8, 3)
    assert functions_of(LOOP) == {2: "square"}
    assert first_divergence(REAL, REAL) is None and first_divergence(REAL[:3], REAL) == 3


def test_hostile_text_stays_text_in_the_page_source():
    code = 's = "</script><script>alert(1)</script>"\nh = "<b>é</b> & ✓"\n'
    data = page_data(
        code,
        Side(steps((1, {"s": repr("</script><script>alert(1)</script>")}, "</script>\n"))),
        title="</title><script>x</script>",
    )
    page = render_page(data)
    assert page.count("<script") == 2  # the data block and the viewer's script, nothing injected
    assert "</script><script>alert" not in page and "\\u003c/script\\u003e" in page
    assert "<title>&lt;/title&gt;&lt;script&gt;x&lt;/script&gt;</title>" in page


def _browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("Debian chromium is not installed (make test installs it)")
    return sync_api


@pytest.fixture(scope="module")
def browser():
    sync_api = _browser()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


def _open(browser, path, dialogs=None):
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    if dialogs is not None:
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    return page


def marked(page, cls="cur"):
    return page.eval_on_selector_all(f"#program .ln.{cls}", "els => els.map(e => Number(e.dataset.line))")


def state_of(page, side="pred"):
    return page.eval_on_selector_all(
        f"#states td[data-side={side}]",
        "tds => tds.map(td => [td.parentElement.dataset.name, td.textContent, td.classList.contains('changed')])",
    )


def test_stepping_by_keyboard_moves_the_line_and_the_state(browser, tmp_path):
    path = tmp_path / "loop.html"
    path.write_text(render_page(page_data(LOOP, Side(PRED), Side(REAL, status="ok"), "loop")))
    page = _open(browser, path)
    assert page.eval_on_selector("body", "b => b.dataset.step") == "0" and marked(page) == [1]
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert marked(page) == [4] and marked(page, "next") == [2]
    assert ["i", "0", True] in state_of(page) and ["total", "0", False] in state_of(page)  # i is new, total kept
    page.keyboard.press("ArrowRight")
    assert page.inner_text("#frame").startswith("predicted: square")
    page.keyboard.press("ArrowLeft")
    assert marked(page) == [4]
    page.keyboard.press("End")
    assert page.eval_on_selector("body", "b => b.dataset.step") == "7"
    assert page.text_content("#out-pred") == "2\n" and page.text_content("#out-real") == ""
    # the first divergence: one key away, marked on the slider and in the state table
    page.keyboard.press("Home")
    page.keyboard.press("d")
    assert page.eval_on_selector("body", "b => b.dataset.step") == "7"
    assert page.is_visible("#diverged") and page.is_visible("#divtick")
    assert page.eval_on_selector_all("#states tr.differs", "trs => trs.map(t => t.dataset.name)") == ["total"]
    assert "first divergence: step 8" in page.inner_text("#summary")
    # the next visit of a line: click it, or `n` for the current line
    page.keyboard.press("Home")
    page.click('#program .ln[data-line="2"]')
    assert page.eval_on_selector("body", "b => b.dataset.step") == "3"
    page.keyboard.press("n")
    assert page.eval_on_selector("body", "b => b.dataset.step") == "6"
    page.eval_on_selector("#slider", "s => { s.value = '4'; s.dispatchEvent(new Event('input')); }")
    assert marked(page) == [5]
    page.close()


def test_a_crash_and_a_capped_prediction_are_shown_at_their_line(browser, tmp_path):
    code = "a = [1]\nb = a[3]\n"
    real = steps((1, {"a": "[1]"}, ""))
    path = tmp_path / "crash.html"
    path.write_text(
        render_page(
            page_data(
                code,
                Side(real, {"type": "IndexError", "line": 2}),
                Side(real, {"type": "IndexError", "line": 2}, status="error"),
                "crash",
            )
        )
    )
    page = _open(browser, path)
    assert "IndexError at line 2" in page.inner_text("#error") and marked(page, "errline") == [2]
    page.close()
    path = tmp_path / "capped.html"
    path.write_text(
        render_page(
            page_data(
                code,
                Side(real * 3, finished=False),
                Side(real, {"type": "IndexError", "line": 2}, status="error"),
                "capped",
                cap=768,
            )
        )
    )
    page = _open(browser, path)
    assert "hit the length cap (768 tokens)" in page.inner_text("#summary")
    page.keyboard.press("End")
    assert "hit the length cap here" in page.inner_text("#error")
    page.close()


def test_hostile_program_renders_escaped_in_the_browser(browser, tmp_path):
    code = 's = "</script><img src=x onerror=alert(1)>"\nt = "naïve ✓ <b>bold</b>"\nprint(s)\n'
    st = steps(
        (1, {"s": repr("</script><img src=x onerror=alert(1)>")}, ""),
        (2, {"s": repr("</script><img src=x onerror=alert(1)>"), "t": repr("naïve ✓ <b>bold</b>")}, ""),
        (3, {"s": "...", "t": "..."}, "</script><img src=x onerror=alert(1)>\n"),
    )
    path = tmp_path / "hostile.html"
    path.write_text(render_page(page_data(code, Side(st), title="<b>hostile</b>")), encoding="utf-8")
    dialogs = []
    page = _open(browser, path, dialogs)
    assert page.query_selector("#program img") is None and page.query_selector("#states b") is None
    assert page.inner_text('#program .ln[data-line="2"] .src') == 't = "naïve ✓ <b>bold</b>"'
    page.keyboard.press("End")
    assert page.text_content("#out-pred").startswith("</script><img")
    assert not dialogs and page.title() == "<b>hostile</b>"
    page.close()


def test_index_sorts_worst_first_and_by_any_column(browser, tmp_path):
    good = page_data(LOOP, Side(REAL), Side(REAL, status="ok"), "good")
    bad = page_data(LOOP, Side(PRED), Side(REAL, status="ok"), "bad")
    index = write_pages(str(tmp_path / "pages"), [("good", good, {}), ("bad</td>", bad, {})])
    page = browser.new_page()
    page.goto((tmp_path / "pages" / "index.html").as_uri())
    ids = lambda: page.eval_on_selector_all("#index tbody tr td:first-child", "tds => tds.map(t => t.textContent)")  # noqa: E731
    assert ids() == ["bad</td>", "good"]  # by score, worst first
    page.click("#index th:text('score')")
    assert ids() == ["good", "bad</td>"]
    page.click("#index tbody tr td a")
    assert page.url.endswith("good.html")
    assert index.endswith("index.html")
    page.close()


def test_trace_batch_writes_pages_and_an_index(overfit_model, tmp_path):
    model, _ = overfit_model
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps({"id": "a", "code": "x = 1\ny = x + 1\n"})
        + "\n"
        + json.dumps({"id": "b/../c", "code": "n = int(input())\nprint(n * 2)\n", "stdin": "4\n"})
        + "\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeexecutor",
            "trace",
            "--batch",
            str(batch),
            "--model",
            str(model),
            "--beam",
            "1",
            "--max-length",
            "32",
            "--compare",
            "--html",
            str(tmp_path / "pages"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert [json.loads(line)["id"] for line in out.stdout.splitlines()] == ["a", "b/../c"]
    names = sorted(p.name for p in (tmp_path / "pages").iterdir())
    assert names == ["a.html", "b_.._c.html", "index.html"]
    assert "real run" in (tmp_path / "pages" / "a.html").read_text()
