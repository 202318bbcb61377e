"""The trace model a command uses when none is named: of the models this repository ships
(`models/NAME` with its `scores.json`), the one with the best CodeNetMut trace accuracy on
the fixed 300-example test sample, the release's metric, greedy. A GPU lease that lands a
better model than the CPU one (gpu_run/land.py) so becomes `trace`'s, `debug`'s and
`evaluate`'s default with nothing else changed; where none is shipped (an installed
package), the demo's model (`make demo`)."""

from __future__ import annotations

import json
import os

SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models")
DEMO = os.path.join("demo_out", "pretrain", "final")
SAMPLE = 300  # the fixed test sample every shipped model is scored on: scores on others do not compare


def ranked(models: str = SHIPPED) -> list[tuple[float, str]]:
    """(CodeNetMut trace accuracy, folder) of each shipped trace model scored on the fixed
    sample, best first (ties: by name)."""
    out = []
    for name in sorted(os.listdir(models)) if os.path.isdir(models) else []:
        folder = os.path.join(models, name)
        try:
            with open(os.path.join(folder, "scores.json")) as f:
                scores = json.load(f)
            with open(os.path.join(folder, "config.json")) as f:
                kind = json.load(f).get("model_type")
        except (OSError, ValueError):
            continue
        accuracy = ((scores.get("sets") or {}).get("codenetmut") or {}).get("trace_accuracy")
        if kind == "codeexecutor" and scores.get("limit") == SAMPLE and accuracy is not None:
            out.append((float(accuracy), folder))
    return sorted(out, key=lambda x: (-x[0], x[1]))


def default_model(models: str = SHIPPED) -> str:
    """The best shipped trace model's folder (relative to the working folder where it lies
    under it, as the help shows it), else the demo's."""
    best = ranked(models)
    if not best:
        return DEMO
    path = best[0][1]
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else path
