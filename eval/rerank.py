"""Reranking candidate solutions by their predicted outputs (docs/metrics.md, downstream).

For each HumanEval problem: the example calls and expected results are read from the
docstring of the original prompt (`>>> f(x)` followed by the result, or `f(x) == y` /
`f(x) ➞ y` lines). Each candidate program (prompt + completion) gets one
`print(repr(call))` per example; the model predicts its trace, and candidates are ranked
by the edit similarity (difflib ratio) of the predicted output to the expected output.
All candidates are then run against the problem's real tests in the sandbox, giving:

* baseline: pass@k of the unranked samples (the unbiased estimator of Chen et al.),
* reranked: pass@k of the model's top-k,
* oracle: pass@k of a ranking by *real* execution of the example calls.

Candidates whose scores tie keep their sample order in `reranked` and `oracle` (one draw of
the tie order); `reranked_expected` and `oracle_expected` give pass@k averaged over every
order of the ties, the same kind of expectation as the baseline's estimator.

The samples here are CodeGen-16B's (CodeT's release): they stand in for the paper's
Codex samples, which are not available.
"""

from __future__ import annotations

import ast
import difflib
import gzip
import json
import math
import re
from dataclasses import dataclass

from codeexecutor.generation.decoding import Decoding

RERANK = Decoding(beam=4, max_length=256, names=False, values=False)  # CodeT samples: beam 4, 256 tokens


@dataclass
class Problem:
    task_id: str
    prompt: str  # the original HumanEval prompt (with its docstring examples)
    entry_point: str
    test: str
    examples: list[tuple[str, str]]  # (call expression, expected value as printed by repr)
    samples: list[str]  # completions


def read_jsonl(path: str) -> list[dict]:
    """Records of a JSON-lines file, gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _norm(expected: str) -> str | None:
    try:
        return repr(ast.literal_eval(expected.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def docstring_examples(prompt: str, entry_point: str) -> list[tuple[str, str]]:
    """(call, expected repr) pairs from a HumanEval prompt's docstring."""
    out = []
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(">>>") and entry_point in s:
            call = s[3:].strip()
            if i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].strip().startswith(">>>"):
                exp = _norm(lines[i + 1])
                if exp is not None:
                    out.append((call, exp))
            continue
        m = re.match(rf"^\s*({re.escape(entry_point)}\(.*\))\s*(?:==|➞|=>|->|should return)\s*(.+?)\s*$", line)
        if m:
            exp = _norm(m.group(2))
            if exp is not None:
                out.append((m.group(1), exp))
    seen, unique = set(), []
    for call, exp in out:
        if call not in seen:
            seen.add(call)
            unique.append((call, exp))
    return unique


def load_problems(problems: str, samples: str, codet_prompts: str | None = None) -> list[Problem]:
    """Join HumanEval problems with a samples file ({prompt, samples} per line, CodeT's
    format, matched by prompt through CodeT's prompt file; or {task_id, completion} lines)."""
    base = {p["task_id"]: p for p in read_jsonl(problems)}
    rows = read_jsonl(samples)
    by_task: dict[str, list[str]] = {}
    if rows and "task_id" in rows[0]:
        for r in rows:
            by_task.setdefault(r["task_id"], []).append(r["completion"])
    else:
        if not codet_prompts:
            raise ValueError(
                "samples in CodeT's {prompt, samples} format need --codet-prompts (HumanEval_for_code_generation.jsonl)"
            )
        prompt_to_task = {p["prompt"]: p["task_id"] for p in read_jsonl(codet_prompts)}
        for r in rows:
            task = prompt_to_task.get(r["prompt"])
            if task is not None:
                by_task[task] = list(r["samples"])
    out = []
    for task_id, p in base.items():
        if task_id in by_task:
            out.append(
                Problem(
                    task_id,
                    p["prompt"],
                    p["entry_point"],
                    p["test"],
                    docstring_examples(p["prompt"], p["entry_point"]),
                    by_task[task_id],
                )
            )
    return out


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al., 2021); k is capped at n."""
    k = min(k, n)
    if c == 0:
        return 0.0
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def ranked_pass_at_k(scores: list[float], passed: list[bool], k: int) -> float:
    """Chance that the k best-scored candidates hold a passing one, ties in random order.

    Groups of equal score are taken best first; the group that the k-th place cuts
    through contributes m of its g members drawn at random, which all fail with
    probability C(g - c, m) / C(g, m) when c of them pass."""
    groups: dict[float, list[bool]] = {}
    for s, ok in zip(scores, passed):
        groups.setdefault(s, []).append(ok)
    left = k
    for s in sorted(groups, reverse=True):
        g, c = len(groups[s]), sum(groups[s])
        m = min(left, g)
        if c and m == g:
            return 1.0
        if m < g:
            return 1.0 - math.comb(g - c, m) / math.comb(g, m)
        left -= m
        if left == 0:
            break
    return 0.0


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False).ratio()


def _predicted_outputs(gen, programs: list[str], decoding: Decoding, batch_size: int) -> tuple[dict, int]:
    """The model's predicted output of each program, by its index; (outputs, programs decoded).
    The model reads each program as the functions set writes them: without docstrings,
    which hold the expected answers and push the calls past the code length."""
    from codeexecutor.modeling.format import FormatError
    from curricula.function_calls import plain_source

    plain = [plain_source(p) for p in programs]
    distinct = list(dict.fromkeys(plain))  # samples repeat (8,113 distinct of 10,900): each is decoded once
    inputs, usable = [], []
    for p in distinct:
        try:
            inputs.append(gen.code_input(p, "codenet"))
            usable.append(p)
        except FormatError:
            pass
    traces = gen.generate(inputs, decoding, batch_size=batch_size)
    outputs = {p: gen.parse(g.text).output for p, g in zip(usable, traces)}
    return {i: outputs[p] for i, p in enumerate(plain) if p in outputs}, len(usable)


def _ranked(prob: Problem, passed: dict, real: dict, predicted: dict, expected: str, ks) -> dict:
    """One problem's pass@k: as sampled, reranked by the predicted output's likeness to the
    expected one, and by the real output's (the oracle)."""
    n = len(prob.samples)
    c = sum(passed.values())
    model_scores = [round(similarity(predicted.get(i, ""), expected), 6) for i in range(n)]
    oracle_scores = [round(similarity(real.get(i, ""), expected), 6) for i in range(n)]
    ok = [bool(passed[i]) for i in range(n)]
    order_model = sorted(range(n), key=lambda i: (-model_scores[i], i))
    order_oracle = sorted(range(n), key=lambda i: (-oracle_scores[i], i))
    return {
        "task_id": prob.task_id,
        "samples": n,
        "correct": c,
        "examples": len(prob.examples),
        "baseline": {k: pass_at_k(n, c, k) for k in ks},
        "reranked": {k: float(any(passed[i] for i in order_model[:k])) for k in ks},
        "oracle": {k: float(any(passed[i] for i in order_oracle[:k])) for k in ks},
        "reranked_expected": {k: ranked_pass_at_k(model_scores, ok, k) for k in ks},
        "oracle_expected": {k: ranked_pass_at_k(oracle_scores, ok, k) for k in ks},
        "model_scores": model_scores,
        "passed": ok,
    }


def rerank(
    problems: list[Problem],
    model: str,
    decoding: Decoding = RERANK,
    ks=(1, 10),
    timeout: float = 3.0,
    progress: bool = True,
    batch_size: int = 16,
) -> dict:
    from codeexecutor.execution import ExecutorPool, Limits, Program
    from codeexecutor.generation import TraceGenerator

    gen = TraceGenerator(model)
    decoding = decoding.resolved(gen)  # the report records what was decoded with
    per_problem, decoded = [], 0
    limits = Limits(timeout=timeout, max_steps=100_000)
    it = problems
    if progress:
        from codeexecutor.progress import bar

        it = bar(problems, desc="rerank", unit="problem")
    with ExecutorPool(2, limits) as pool:
        for prob in it:
            if not prob.examples:
                continue
            expected = "\n".join(e for _, e in prob.examples) + "\n"
            calls = "".join(f"print(repr({c}))\n" for c, _ in prob.examples)
            programs = [prob.prompt + s + "\n\n" + calls for s in prob.samples]
            tests = [prob.prompt + s + "\n\n" + prob.test + f"\ncheck({prob.entry_point})\n" for s in prob.samples]
            passed = {k: r.ok for k, r in pool.execute_many(Program(t, "", i) for i, t in enumerate(tests))}
            real = {k: r.stdout for k, r in pool.execute_many(Program(p, "", i) for i, p in enumerate(programs))}
            predicted, count = _predicted_outputs(gen, programs, decoding, batch_size)
            decoded += count
            per_problem.append(_ranked(prob, passed, real, predicted, expected, ks))
    summary = {}
    for name in ("baseline", "reranked", "oracle", "reranked_expected", "oracle_expected"):
        summary[name] = {f"pass@{k}": 100 * sum(p[name][k] for p in per_problem) / max(1, len(per_problem)) for k in ks}
    return {
        "model": model,
        "problems": len(per_problem),
        "beam": decoding.beam,
        "max_length": decoding.max_length,
        "constrained_names": decoding.names,
        "constrained_values": decoding.values,
        "candidates": sum(p["samples"] for p in per_problem),
        "decoded": decoded,
        "summary": summary,
        "per_problem": per_problem,
        "note": "CodeGen-16B samples (CodeT) stand in for the paper's Codex samples",
    }
