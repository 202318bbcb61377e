"""The model card (README.md, Hugging Face's layout) of a trained model: what `codeexecutor
pretrain` writes beside its final model, and what a model this project ships carries."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

ORDER = ("singleline", "tutorial", "codenetmut", "errors", "functions", "functions_errors")
DATA = """- CodeNetMut: mutants of real Python contest programs (the two CodeNet-layout AtCoder
  corpora in ../shared/data, programs only from repositories with a permissive LICENSE file:
  see their MANIFEST.md) and the crashing ones, each traced in the sandbox on its sample input;
- Tutorial: runnable examples of the Python 3.11 tutorial (PSF License), with mutants;
- SingleLine: one line of those programs with its state before and after;
- Functions: doctest and test calls of TheAlgorithms/Python and keon/algorithms (MIT), each a
  program with its definitions inlined, and mutants of them."""


def _num(value) -> str:
    """A score as the card shows it: two decimals at most, "-" where a set has none."""
    return "-" if value is None else f"{round(float(value), 2):g}"


@dataclass(frozen=True)
class Training:
    """How a model was trained, as its card says it: the device, the recipe, the steps of
    each stage, the minutes of training and the command that ran it."""

    device: str
    recipe: str | None
    steps: dict | None
    minutes: float
    command: str


def write_card(dest, scores: dict, training: Training, parameters: int | None = None, note: str = "") -> str:
    """README.md in `dest`: what the model is, its data and licence, how it was trained
    (`training`) and its scores per test set, plainly."""
    device, recipe, steps = training.device, training.recipe, training.steps
    minutes, command = training.minutes, training.command
    dest = pathlib.Path(dest)
    config = json.loads((dest / "config.json").read_text())
    parameters, stored = _weights(dest, parameters)
    rows = _score_rows(scores.get("sets") or scores.get("test") or {})
    errors = scores.get("runtime_errors") or {}
    try:  # the folder as a user of a clone names it
        shown = dest.resolve().relative_to(pathlib.Path(__file__).resolve().parents[2]).as_posix()
    except ValueError:
        shown = dest.as_posix()
    text = f"""---
license: mit
library_name: transformers
tags: [code-execution, python, execution-trace, codeexecutor]
pipeline_tag: text-generation
---

# {dest.name}

A CodeExecutor-style model of this project: given a Python program (stdin inlined), it writes
the program's execution trace — the lines it runs, the variables after each, what it prints,
and the exception with its line where it crashes. Use it with this repository's CLI, offline:

    codeexecutor trace prog.py --stdin in.txt --model {shown} --compare

- architecture: RoBERTa encoder as a prefix-LM (`model_type: codeexecutor`), {config.get("num_hidden_layers")} layers of
  {config.get("hidden_size")}, {f"{parameters:,}" if parameters else "?"} parameters, vocabulary {config.get("vocab_size")}, weights in {stored};
- trace format: profile `{config.get("format_profile")}`, states `{config.get("trace_state")}`, step order
  `{config.get("step_order")}` (docs/trace-format.md); traces made by Python {config.get("trace_python") or "3.11"};
- trained on {device}, {minutes} minutes of training, recipe `{recipe}`, steps {" / ".join(f"{k} {v:,}" for k, v in (steps or {}).items()) or "?"}, by
  `{command}`.

## Data

{DATA}

## Scores

The release's metric (codeexecutor/modeling/trace_metrics.py, docs/metrics.md), greedy decoding, the fixed test
sample of each held-out set (`evaluate --limit 300`); aligned output accuracy is our variant
(docs/metrics.md). One standard error is about 2.9 points at 300 examples.

| test set | examples | trace accuracy | output accuracy | aligned output | line F1 |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Runtime errors (crashing programs against the CodeNetMut ones): detection
{_num(errors.get("detection_accuracy"))}%, localisation {_num(errors.get("localisation_accuracy", errors.get("localization_accuracy")))}%.
{note}
## Licence

MIT, as this repository; the training data's licences are above (MIT, PSF, and the
permissive licences of the contest repositories named in their MANIFEST.md).
"""  # noqa: E501  (the card's text: its lines as written)
    path = dest / "README.md"
    path.write_text(text)
    return str(path)


def _weights(dest: pathlib.Path, parameters: int | None) -> tuple[int | None, str]:
    """(the parameter count, read from the weights file unless given; how the weights are stored)."""
    from codeexecutor.modeling.int8 import INT8_FILE, SCALE

    int8 = (dest / INT8_FILE).exists() and not (dest / "model.safetensors").exists()
    weights_file = dest / (INT8_FILE if int8 else "model.safetensors")
    if parameters is None and weights_file.exists():
        from safetensors import safe_open

        with safe_open(str(weights_file), "pt") as f:
            parameters = sum(_count(f.get_slice(k).get_shape()) for k in f.keys() if not k.endswith(SCALE))
    stored = "int8 codes with a float32 scale a row (norms in bfloat16; loaded into float32)" if int8 else "bfloat16"
    return parameters, stored


def _score_rows(sets: dict) -> list[str]:
    """The scores table's rows, the test sets in the card's order, then any others."""
    rows = []
    for name in [n for n in ORDER if n in sets] + [n for n in sets if n not in ORDER]:
        s = sets[name]
        aligned = s.get("aligned") or s.get("ours_aligned") or {}
        aligned = aligned.get("aligned_output_accuracy", aligned.get("output_accuracy"))
        rows.append(
            f"| {name} | {s.get('examples')} | {_num(s.get('trace_accuracy'))} | {_num(s.get('output_accuracy'))} | "
            f"{_num(aligned)} | {_num(s.get('line_f1'))} |"
        )
    return rows


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
