"""`codeexecutor evaluate --model M --data DIR|FILE.json`: Table 3 (and more) for test sets.

`--data DIR`: every dataset found under DIR (folders written by `codeexecutor build`:
codenetmut, tutorial, singleline, functions and the error-trace sets) is serialized in the model's
format profile from its structured steps, and the model generates a trace for each
example of the chosen split. `--data FILE.json`: a test file in the release's format
(JSON Lines with `code_tokens` and `trace_tokens`, optional `id`, `code`, `trace`), fed
as the release feeds it: `<task> ` + the code tokens joined by spaces.

Golds are cut as the release cuts them (766 BPE tokens, then decoded). The Table-3
numbers are the release's metric (codeexecutor/modeling/trace_metrics.py, its SingleLine variant for
SingleLine); our aligned variant, ORCA's trace metrics and a per-category breakdown in
the spirit of the paper's Table 4 (loops, conditionals, lists, strings, function calls)
come beside them, each under its own name. Runtime-error metrics are computed over the
error-trace test set together with the codenetmut test programs (the negatives), and
apart for the functions' crashes against the clean functions (`runtime_errors_functions`); with
`--resource-descriptions problems.jsonl` once more with each problem's input
specification prepended as a docstring (Bieber et al.). The report is written as JSON
(`--out`, default DIR/evaluation.json or FILE.evaluation.json), the predictions beside
it as JSON Lines, with a PNG of the per-category accuracy.
"""

from __future__ import annotations

import ast
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from codeexecutor.errors import ConfigError
from codeexecutor.generation.answers import Answers, generate_answers
from codeexecutor.generation.decoding import UNRULED, Decoding
from codeexecutor.generation.verdict import finite_margin
from codeexecutor.modeling.int8 import INT8_FILE
from codeexecutor.modeling.profiles import lacks_depth
from codeexecutor.modeling.trace_metrics import (
    TraceRecord,
    aligned_metrics,
    crash_score_auroc,
    error_metrics,
    orca_metrics,
    table3_metrics,
)

CRASH_FAMILIES = {
    "errors": "plain",
    "codenetmut": "plain",  # crashing programs against the clean ones they sit beside
    "functions_errors": "functions",
    "functions": "functions",
}
CATEGORIES = ("loops", "conditionals", "lists", "strings", "function_calls")
METRIC_NAME = "release: CodeExecutor inference/metric.py (compute_metrics; compute_singleline_metrics for SingleLine)"


def categories(code: str) -> list[str]:
    """The Table-4-style categories a program belongs to, from its syntax."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.For, ast.While, ast.comprehension)):
            found.add("loops")
        elif isinstance(n, (ast.If, ast.IfExp)):
            found.add("conditionals")
        elif isinstance(n, (ast.List, ast.ListComp, ast.Tuple, ast.Subscript)):
            found.add("lists")
        elif isinstance(n, (ast.JoinedStr,)) or (isinstance(n, ast.Constant) and isinstance(n.value, str)):
            found.add("strings")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defined:
            found.add("function_calls")
    return [c for c in CATEGORIES if c in found]


def find_datasets(root: str) -> dict[str, str]:
    """name -> folder of every saved DatasetDict under root, symbolic links followed (a
    data folder may link the datasets it shares with another), each real folder once."""
    out, seen = {}, set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:  # a link back up the tree, or a second link to the same folder
            dirnames[:] = []
            continue
        seen.add(real)
        if "dataset_dict.json" in filenames:
            out[os.path.basename(dirpath)] = dirpath
            dirnames[:] = []
    return dict(sorted(out.items()))


def _docstrings(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    from eval.rerank import read_jsonl

    out = {}
    for rec in read_jsonl(path):
        spec = "\n".join(x for x in (rec.get("input_spec"), rec.get("constraints")) if x)
        if spec:
            out[rec["problem_id"]] = spec
    return out


def _shift(rec: TraceRecord, offset: int) -> TraceRecord:
    steps = tuple((line - offset, state, out) for line, state, out in rec.steps if line > offset)
    line = rec.exception_line - offset if rec.exception_line else None
    return TraceRecord(steps, rec.exception, line)


def sample(n: int, limit: int | None, seed: int = 0) -> list[int]:
    """Indices of all n examples, or of a fixed random sample of `limit` of them (in order):
    the first `limit` of one seeded permutation of the n, so that a smaller sample is part
    of every larger one (`--limit 50` scores the first 50 of `--limit 300`'s examples)."""
    if not limit or limit >= n:
        return list(range(n))
    import random

    order = list(range(n))
    random.Random(seed).shuffle(order)
    return sorted(order[:limit])


def task_of_file(path: str, task: str | None) -> str:
    if task:
        return task
    name = os.path.basename(path).lower()
    return "singleline" if "singleline" in name else "tutorial" if "tutorial" in name else "codenet"


def read_release_file(path: str) -> list[dict]:
    """Rows of a test file in the release's format; UsageError naming the bad line."""
    from codeexecutor.errors import UsageError
    from codeexecutor.source import read_text_file

    rows = []
    for n, line in enumerate(read_text_file(path, "test file").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row.get("code_tokens"), list) or not isinstance(row.get("trace_tokens"), list):
                raise ValueError("no code_tokens/trace_tokens lists")
        except (ValueError, AttributeError) as exc:
            raise UsageError(
                f"{path}:{n}: not a line of the release's test format ({exc}); expected JSON with "
                '"code_tokens" and "trace_tokens" lists (codenetmut_test.json)'
            ) from None
        if row["code_tokens"]:  # the release skips empty programs too
            rows.append(row)
    if not rows:
        raise UsageError(f"{path} has no examples (expected JSON Lines with code_tokens and trace_tokens)")
    return rows


def _scored(enc, outs) -> list[str]:
    """The predictions as the metric reads them (Encoder.scored: a delta model's expanded
    answers cut like the references)."""
    return [enc.scored(o.text) for o in outs]


def expansion_summary(outs) -> dict:
    """How many of a delta model's answers had steps the expansion could not read, and the
    tokens it wrote against the full-state text they stand for (not cut)."""
    return {
        "malformed": sum(o.expansion_problems > 0 for o in outs),
        "problems": sum(o.expansion_problems for o in outs),
        "generated_tokens": sum(o.tokens for o in outs),
    }


def _finished(ended: Sequence[bool]) -> tuple[list[int], float | None]:
    """(indices of the answers that ended at </s>, percentage cut at the length cap)."""
    done = [i for i, e in enumerate(ended) if e]
    return done, round(100 * (len(ended) - len(done)) / len(ended), 2) if ended else None


def unfinished_summary(preds: list[str], golds: list[str], ended: list[bool], singleline: bool) -> dict:
    """Predictions cut at the length cap before </s> (mostly a value repeated in a loop):
    their last steps, output and crash verdict are missing, whatever the metric says.
    How many, and the trace accuracy (the release's metric) of the others."""
    done, share = _finished(ended)
    return {
        "predictions": len(golds) - len(done),
        "share": share,
        "trace_accuracy_of_finished": table3_metrics(
            [preds[i] for i in done], [golds[i] for i in done], singleline=singleline
        )["trace_accuracy"]
        if done
        else None,
    }


def _score(
    name: str,
    split: str,
    codes: list[str],
    preds: list[str],
    golds: list[str],
    parse,
    singleline: bool,
    ended: list[bool],
) -> dict:
    precs, refs = [TraceRecord.from_parsed(parse(t)) for t in preds], [TraceRecord.from_parsed(parse(t)) for t in golds]
    entry = {
        "split": split,
        "examples": len(golds),
        "table3": table3_metrics(preds, golds, singleline=singleline),
        "unfinished": unfinished_summary(preds, golds, ended, singleline),
        "aligned": aligned_metrics(precs, refs),
        "orca": orca_metrics(precs, refs),
        "categories": {},
    }
    by_cat = defaultdict(list)
    for i, code in enumerate(codes):
        for c in categories(code):
            by_cat[c].append(i)
    for c, idx in by_cat.items():
        m = table3_metrics([preds[i] for i in idx], [golds[i] for i in idx], singleline=singleline)
        entry["categories"][c] = {
            "programs": len(idx),
            "trace_accuracy": m["trace_accuracy"],
            "output_accuracy": m["output_accuracy"],
        }
    return entry


@dataclass(frozen=True)
class EvalOptions:
    """An evaluation's rarer choices. `batch_size`: programs decoded at once (default: what
    the beam allows). `resource_descriptions`: the problems' input descriptions (a JSON
    Lines file), to score the runtime-error reports with and without them. `task`: the
    task of a release-format file (default: read from its name). `answers`: a JSON Lines
    file the answers are appended to as each batch is decoded; started again with the same
    settings, the evaluation decodes only the examples it lacks (`Answers`). `shard` (i, n):
    decode only the i-th of n shares of every dataset into the answers file's shard and
    return what was decoded, unscored (one process per rank or device); a run without a
    shard then reads every shard's answers and scores the whole. `html`: a folder for the
    trace viewer's pages, one per example (prediction beside reference) and an index
    sortable by score (generation/html.py)."""

    batch_size: int | None = None
    resource_descriptions: str | None = None
    task: str | None = None
    answers: str | None = None
    shard: tuple[int, int] | None = None
    html: str | None = None


def evaluate_model(
    model: str,
    data: str,
    split: str = "test",
    limit: int | None = None,
    decoding: Decoding = UNRULED,
    progress: bool = True,
    options: EvalOptions | None = None,
) -> dict:
    """Scores a model on built datasets (or a release-format test file), decoded as
    `decoding` says (generation/decoding.py). By default as `trace` decodes (the beam the
    model's: greedy for our own trace formats, 10 for the released checkpoint) but without
    the state rules, as the release; the report records the decoding used. Each prediction
    records its `exception_peak` (the crash margin) where the model has that step.
    `options`: batch size, resource descriptions, answers file, shard and viewer pages
    (`EvalOptions`)."""
    from codeexecutor.errors import UsageError

    if not os.path.exists(data):
        raise UsageError(
            f"no test data at {data}: pass a folder of built datasets (codeexecutor build ... --out) "
            "or a test file in the release's format (codenetmut_test.json)"
        )
    rows_of_file = read_release_file(data) if os.path.isfile(data) else None
    found = {} if rows_of_file is not None else find_datasets(data)
    if rows_of_file is None and not found:
        raise UsageError(f"no built datasets under {data} (run `codeexecutor build ...` first)")
    options = options or EvalOptions()
    if options.shard is not None and not options.answers:
        raise UsageError("a sharded evaluation needs an answers file to decode into")
    run = _Scoring(model, data, split, limit, decoding, progress, options)
    if rows_of_file is not None:
        return run.release_file(rows_of_file, options.task)
    docs = _docstrings(options.resource_descriptions)
    for name, path in found.items():
        run.dataset(name, path, docs)
    return run.finish()


class _Scoring:
    """One evaluation in its phases: the model and its decoding set up, the answers
    journal opened (`__init__`); a release-format file scored (`release_file`) or each
    built dataset decoded and scored in turn (`dataset`); then the runtime-error reports
    and the viewer's pages (`finish`). A sharded run decodes and scores nothing."""

    def __init__(self, model, data, split, limit, decoding: Decoding, progress, options: EvalOptions) -> None:
        from codeexecutor.generation import TraceGenerator
        from codeexecutor.generation.api import programs_per_batch

        answers, shard, html, batch_size = options.answers, options.shard, options.html, options.batch_size
        self.gen = TraceGenerator(model)
        self.enc, self.profile = self.gen.encoder, self.gen.profile
        self.model, self.data, self.split, self.limit, self.html = model, data, split, limit, html
        self.decoding = decoding.resolved(self.gen)
        self.beam, self.progress, self.shard = self.decoding.beam, progress, shard
        self.batch_size = batch_size or programs_per_batch(self.beam)
        self.report: dict = {
            "model": model,
            "data": data,
            "split": split,
            "beam": self.beam,
            "metric": METRIC_NAME,
            "trace_python": getattr(self.gen.model.config, "trace_python", None),
            "format_profile": self.profile.label,
            "trace_state": self.profile.state,
            "constrained_names": self.decoding.names,
            "constrained_values": self.decoding.values,
            "exception_bias": self.decoding.exception_bias,
            "exception_at": self.decoding.exception_at,
            "length_penalty": self.decoding.length_penalty,
            "datasets": {},
        }
        self.decoded = {"shard": f"{shard[0]}/{shard[1]}", "decoded": 0, "examples": 0} if shard else None
        self.journal = self._journal(answers) if answers else None
        self.predictions: list[dict] = []
        self.pages: list = []
        self.error_pairs: dict[str, list] = {
            "plain": [],
            "described": [],
            "functions": [],
            "detector_plain": [],
            "detector_functions": [],
        }

    def _journal(self, answers: str) -> Answers:
        """The answers file (resumable), bound to the model's weights and the decoding."""
        weights = os.path.join(self.model, "model.safetensors")
        if not os.path.exists(weights):
            weights = os.path.join(self.model, INT8_FILE)  # a shipped folder in int8
        stamp = os.path.getmtime(weights) if os.path.exists(weights) else None
        settings = {
            "model": os.path.abspath(self.model) if os.path.exists(self.model) else self.model,
            "stamp": stamp,
            "beam": self.beam,
            "max_length": self.decoding.max_length,
            **self.decoding.rules(),
        }
        journal = Answers(answers, shard=self.shard, settings=settings)
        self.report["answers"] = {"file": answers, "resumed": journal.resumed}
        return journal

    def _decode(self, inputs: list[str], keys: list[str]) -> list:
        return generate_answers(
            self.gen, inputs, self.decoding, self.batch_size, self.progress, self.journal, keys, self.shard
        )

    def release_file(self, rows_of_file: list[dict], task: str | None) -> dict:
        """A test file in the release's JSON Lines format, scored as one set."""
        enc, data, limit = self.enc, self.data, self.limit
        name = task_of_file(data, task)
        rows = [rows_of_file[i] for i in sample(len(rows_of_file), limit)]
        golds = [enc.gold(" ".join(r["trace_tokens"])) for r in rows]
        keys = [f"{name}/{r.get('id', i)}" for i, r in zip(sample(len(rows_of_file), limit), rows)]
        outs = self._decode([f"<{name}> " + " ".join(r["code_tokens"]) for r in rows], keys)
        if self.decoded is not None:
            decoded = sum(o is not None for o in outs) - self.journal.resumed
            return {**self.decoded, "answers": self.journal.path, "examples": len(outs), "decoded": decoded}
        preds, ended = _scored(enc, outs), [o.finished for o in outs]
        codes = [r.get("code", "") for r in rows]
        self.report["datasets"][name] = _score(
            name, os.path.basename(data), codes, preds, golds, self.gen.parse, name == "singleline", ended
        )
        self.predictions += [
            {
                "dataset": name,
                "id": r.get("id", i),
                "prediction": o.text,
                "gold": g,
                "finished": o.finished,
                "exception_peak": finite_margin(o.exception_peak),
                "exception_end": finite_margin(o.exception_end),
            }
            for i, (r, o, g) in enumerate(zip(rows, outs, golds))
        ]
        return {**self.report, "predictions": self.predictions}

    def dataset(self, name: str, path: str, docs: dict) -> None:
        """One built dataset: its split sampled, decoded, scored (by kind where it holds
        originals and mutants), its predictions, pages and runtime-error pairs kept."""
        import datasets

        dd = datasets.load_from_disk(path)
        use = self.split if self.split in dd else ("valid" if "valid" in dd else None)
        if use is None:
            return
        table = dd[use]
        rows = [table[i] for i in sample(len(table), self.limit)]
        if not rows:
            return
        if self.profile.order == "end" and lacks_depth(rows):
            raise ConfigError(
                f"{path} was built before steps carried their call depth; rebuild it to score a model "
                "that writes steps in end order"
            )
        pairs = [self.profile.full.example(r) for r in rows]  # references with whole states, whatever the model writes
        golds = [self.enc.gold(t) for _, t in pairs]
        outs = self._decode([c for c, _ in pairs], [f"{name}/{use}/{r['id']}" for r in rows])
        if self.decoded is not None:
            self.decoded["examples"] += len(outs)
            self.decoded["decoded"] += sum(o is not None for o in outs)
            return
        preds = _scored(self.enc, outs)
        self.report["datasets"][name] = self._dataset_report(name, path, use, rows, outs, preds, golds)
        unseen = self._past_window(name, [c for c, _ in pairs], preds, golds, rows[0]["task"] == "singleline")
        self.predictions += [
            {
                "dataset": name,
                "id": r["id"],
                "prediction": o.text,
                "gold": g,
                "finished": o.finished,
                "exception_peak": finite_margin(o.exception_peak),
                "exception_end": finite_margin(o.exception_end),
                **({"compact": o.compact, "expansion_problems": o.expansion_problems} if self.profile.delta else {}),
                **({"unseen_lines": u} if u else {}),
            }
            for r, o, g, u in zip(rows, outs, golds, unseen)
        ]
        if self.html is not None:
            self.pages += _pages(name, rows, outs, pairs, self.gen.parse)
        self._crash_pairs(name, rows, outs, pairs, docs)

    def _past_window(self, name: str, inputs: list[str], preds, golds, singleline: bool) -> list[list[int]]:
        """Each program's 1-based lines the model's code window leaves unread; a dataset
        that has such programs says how many, and scores the others apart."""
        unseen = [[k + 1 for k in self.enc.unseen_lines(text)[1]] for text in inputs]
        long = [i for i, u in enumerate(unseen) if u]
        if long:
            inside = [i for i, u in enumerate(unseen) if not u]
            self.report["datasets"][name]["past_code_window"] = {
                "examples": len(long),
                "share": round(100 * len(long) / len(inputs), 2),
                "trace_accuracy_of_the_rest": table3_metrics(
                    [preds[i] for i in inside], [golds[i] for i in inside], singleline=singleline
                )["trace_accuracy"]
                if inside
                else None,
            }
            self.report.setdefault("notes", []).append(
                f"{name}: {len(long)} of {len(inputs)} programs are longer than the model reads "
                f"({self.enc.code_body} code tokens): their unread lines are in the predictions (unseen_lines)"
            )
        return unseen

    def _dataset_report(self, name, path, use, rows, outs, preds, golds) -> dict:
        from codeexecutor.execution.interpreters import dataset_python
        from codeexecutor.generation.api import interpreter_note

        singleline = rows[0]["task"] == "singleline"
        ended = [o.finished for o in outs]
        entry = _score(name, use, [r["code"] for r in rows], preds, golds, self.gen.parse, singleline, ended)
        traced = dataset_python(path)
        entry["traced_by"] = traced  # the interpreter of the test set's build (stats.json)
        note = interpreter_note(self.gen.model.config, traced) if traced else None
        if note:
            self.report.setdefault("notes", []).append(f"{name}: {note}")
        if self.profile.delta:
            entry["expansion"] = expansion_summary(outs)
        kinds = sorted({r["kind"] for r in rows})
        if len(kinds) > 1:  # held-out originals and their mutants, apart
            entry["by_kind"] = {
                k: {
                    "examples": sum(r["kind"] == k for r in rows),
                    **table3_metrics(
                        [p for p, r in zip(preds, rows) if r["kind"] == k],
                        [g for g, r in zip(golds, rows) if r["kind"] == k],
                        singleline=singleline,
                    ),
                }
                for k in kinds
            }
        return entry

    def _crash_pairs(self, name, rows, outs, pairs, docs) -> None:
        """A crash test set's (prediction, reference) pairs for the runtime-error reports."""
        family = CRASH_FAMILIES.get(name)
        if family is None:
            return
        parse = self.gen.parse
        refs = [TraceRecord.from_parsed(parse(t)) for _, t in pairs]  # uncut: the exception step is the label
        for p, ref in zip(self.predictions[-len(rows) :], refs):  # the gold above may be cut before its crash step
            p["crashed"] = ref.exception is not None
        self.error_pairs[family] += [
            (TraceRecord.from_parsed(parse(o.text)), r, o.finished, (o.exception_peak, o.exception_end))
            for o, r in zip(outs, refs)
        ]
        detector = getattr(self.gen, "detector", None)
        if detector is not None:  # the product's verdict where the model carries one (generation/api.py one_verdict)
            said = detector.predict([r["code"] for r in rows])
            self.error_pairs["detector_" + family] += [
                (TraceRecord((), v.type if v.crashed else None, v.line if v.crashed else None), r)
                for v, r in zip(said, refs)
            ]
        if docs and family == "plain":
            described = _described(self.gen, rows, docs, self.decoding, self.batch_size, self.progress)
            self.error_pairs["described"] += list(zip(described, refs))

    def finish(self) -> dict:
        """The runtime-error reports and the viewer's index; a sharded run's decoding counts."""
        if self.decoded is not None:
            decoded = self.decoded["decoded"] - self.journal.resumed
            return {**self.decoded, "answers": self.journal.path, "decoded": decoded}
        report, error_pairs = self.report, self.error_pairs
        for family, key in (("plain", "runtime_errors"), ("functions", "runtime_errors_functions")):
            if error_pairs[family]:
                report[key] = _crash_report(*zip(*error_pairs[family]))
        for family, key in (("plain", "runtime_errors"), ("functions", "runtime_errors_functions")):
            if error_pairs["detector_" + family]:  # the crash detector's verdict beside the trace's
                report[key + "_detector"] = error_metrics(*zip(*error_pairs["detector_" + family]))
        if error_pairs["plain"] and error_pairs["described"]:
            p, r = zip(*error_pairs["described"])
            report["runtime_errors_with_resource_descriptions"] = error_metrics(p, r)
        if self.html is not None:
            from codeexecutor.generation.html import write_pages

            title = f"{os.path.basename(os.path.normpath(self.model))} on {self.split}"
            report["html_index"] = write_pages(self.html, self.pages, title)
        return {**report, "predictions": self.predictions}


def _crash_report(p, r, ended, margins) -> dict:
    """Runtime-error detection, localisation and kind over crashing and clean programs."""
    out = error_metrics(p, r)
    if None not in margins[0]:  # how well the <exception> margin ranks crashes (threshold-free): its peak, at the end
        crashed = [x.exception is not None for x in r]
        out["crash_score_auroc"] = crash_score_auroc([m[0] for m in margins], crashed)
        out["crash_score_auroc_end"] = crash_score_auroc([m[1] for m in margins], crashed)
    done, out["unfinished_share"] = _finished(ended)
    if done:  # the verdict where the model got to the end of its trace
        out["finished_only"] = error_metrics([p[i] for i in done], [r[i] for i in done])
    return out


def _pages(name: str, rows: list[dict], outs: list, pairs: list[tuple[str, str]], parse) -> list:
    """The viewer's pages of one test set: each prediction (whole states) beside its reference."""
    from codeexecutor.generation.html import Side, page_data

    def side(parsed, finished=True, label=""):
        steps = [s.to_json() for s in parsed.steps]
        err = {"type": parsed.exception, "line": parsed.exception_line} if parsed.exception else None
        return Side(steps, err, finished, label=label)

    out = []
    for r, o, (_, target) in zip(rows, outs, pairs):
        pred, ref = side(parse(o.text), o.finished), side(parse(target), label="reference")
        data = page_data(r["code"], pred, ref, f"{name} {r['id']}")
        out.append((f"{name}-{r['id']}", data, {"dataset": name}))
    return out


def _described(gen, rows, docs, decoding: Decoding, batch_size, progress) -> list[TraceRecord]:
    """Predictions with each problem's input spec prepended as a docstring, in the
    program's own line numbers."""
    inputs, offsets = [], []
    for r in rows:
        code, offset = r["code"], 0
        if r["problem_id"] in docs:
            doc = '"""' + docs[r["problem_id"]].replace('"""', "'''") + '\n"""\n'
            if len((doc + code).splitlines()) <= 200:
                code, offset = doc + code, doc.count("\n")
        inputs.append(gen.code_input(code, r["task"]))
        offsets.append(offset)
    outs = generate_answers(gen, inputs, decoding, batch_size, progress)
    return [_shift(TraceRecord.from_parsed(gen.parse(o.text)), k) for o, k in zip(outs, offsets)]
