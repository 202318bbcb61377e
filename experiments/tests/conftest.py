"""The lab's tests: the scripts of experiments/ (and the benchmarks they lean on) run as
their users run them. The product's tests (tests/) never import from experiments/; these
reach the scripts by their folder, as `python experiments/NAME.py` does."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
for folder in ("experiments", "benchmarks"):
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))
