"""The README's Python example runs as written, with the model the repository ships."""

import os
import re
import subprocess
import sys

from .conftest import ROOT


def test_the_readme_python_example_runs(tmp_path):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    example = next(b for b in blocks if "trace_program" in b)
    assert '"models/codeexecutor-mini-cpu"' in example
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("ok 6 ") and lines[0].endswith(" steps")  # the real run prints 0+1+2+3
    assert len(lines) == 5 and lines[-1].endswith("predicted steps")
