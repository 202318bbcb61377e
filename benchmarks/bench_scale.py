"""Benchmark: the data path from a build's journal to the first training step, at growing N.

    .venv/bin/python benchmarks/bench_scale.py --journal DIR/codenetmut/journal.jsonl [--sizes 10000 100000]

Executing a million programs takes hours (bench_build measures that rate per core); what
must not grow faster than the rows is everything after it. So this takes the records of a
real build's journal and writes journals of N rows from them (new ids, the same programs
and traces), then times each phase in a process of its own, reading its peak resident
memory, at every N in one run (the ratios between sizes hold on a noisy machine):

- finalize: the journal into datasets (`save_journal_datasets`);
- merge: four shards of it merged into one journal and finalized (`build merge`);
- tokenize: the datasets' ids for one tokenizer (`codeexecutor tokenize`'s path), bytes
  on disk per example;
- sampler: a token-budget micro-batch's indices and collation, per micro-batch;
- first step: `python -m codeexecutor.training` from start to its first optimizer step
  on the tokenized data (a tiny model): a first run, then the same run again with the
  files it read in the page cache.

Memory is reported twice: the peak RSS (VmHWM), which also counts the pages of the
memory-mapped Arrow files a phase read, and the memory a phase holds (its peak anonymous
RSS, or its workers' anonymous RSS summed where they do the work), which is what must
fit in a machine.
Writes benchmarks/results/bench_scale.json and bench_scale.png (time and memory against N).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from _common import ROOT, write_report  # noqa: E402  (puts ROOT on sys.path)

PHASES = ("finalize", "merge", "tokenize", "sampler", "first_step")


def synth_journal(source: pathlib.Path, out: pathlib.Path, n: int) -> int:
    """A journal of `n` records cycling through `source`'s (ids made unique per lap), one
    unit per source unit, read and written line by line; returns the records written."""
    written, lap = 0, 0
    with open(out, "w", encoding="utf-8") as f:
        while written < n:
            with open(source, encoding="utf-8") as src:
                for line in src:
                    obj = json.loads(line)
                    if "_done" in obj:
                        f.write(json.dumps({**obj, "_done": f"{obj['_done']}~{lap}"}) + "\n")
                        if written >= n:
                            break
                        continue
                    f.write(
                        json.dumps({**obj, "id": f"{obj['id']}~{lap}", "source_id": f"{obj['source_id']}~{lap}"}) + "\n"
                    )
                    written += 1
            lap += 1
    return written


def peak_rss_mib() -> float:
    """This process's peak resident memory since it started its program (VmHWM; the
    getrusage figure would count what the parent held when it forked)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def rss_anon_kib(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:  # the process has just ended
        pass
    return 0


def descendants(root: int) -> list[int]:
    """The processes started by `root`, and theirs (read off /proc/PID/stat's parent ids)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [root]
    while frontier:
        kids = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


class AnonPeak:
    """The peak of this process's anonymous resident memory (RssAnon), and of its child
    processes' together, sampled every 20 ms on a thread: what the phase and its workers
    hold. VmHWM, and getrusage's figure for children, also count the pages of
    memory-mapped Arrow files a process read, which the kernel drops when memory is short."""

    def __init__(self) -> None:
        import threading

        self.peak = self.children_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        me, tick = os.getpid(), 0
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_anon_kib())
            tick += 1
            if tick % 5 == 0:  # children every 100 ms: reading /proc whole costs more
                self.children_peak = max(self.children_peak, sum(rss_anon_kib(pid) for pid in descendants(me)))

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return round(max(self.peak, rss_anon_kib()) / 1024, 1), round(self.children_peak / 1024, 1)


def phase(name: str, work: pathlib.Path) -> dict:
    """Run one phase in a fresh process; its seconds and peak RSS (MiB)."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--phase", name, "--work", str(work)], capture_output=True, text=True, cwd=ROOT
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench_scale: phase {name} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"seconds": round(seconds, 2), **out}


def run_phase(name: str, work: pathlib.Path) -> dict:
    """The body of one phase, in its own process (its peak RSS is its own)."""
    sys.path.insert(0, str(ROOT))
    extra: dict = {}
    anon = AnonPeak()
    if name == "finalize":
        from curricula.common import save_journal_datasets

        extra["sizes"] = save_journal_datasets(
            str(work / "build" / "journal.jsonl"), str(work / "build"), ("codenetmut", "errors")
        )
    elif name == "merge":
        from curricula.codenet import merge_shards

        shards = sorted(p.parent for p in (work / "shards").glob("*/journal.jsonl"))
        merge_shards(str(work / "merged"), [str(s) for s in shards])
    elif name == "tokenize":
        import datasets

        from codeexecutor.modeling.profiles import Profile
        from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
        from codeexecutor.training.tokenized import write_tokenized

        profile = Profile("exact", state="delta", order="end")
        tok = load_tokenizer(str(work / "tokenizer"), delta=True)
        marker = write_tokenized(
            str(work / "build" / "codenetmut"), Encoder(tok, 256, 768, profile), str(work / "tokenized"), num_proc=2
        )
        size = sum(f.stat().st_size for f in (work / "tokenized").rglob("*") if f.is_file())
        rows = len(datasets.load_from_disk(str(work / "build" / "codenetmut"))["train"])
        extra.update(
            rows=marker["rows"],
            bytes_per_example=round(size / max(1, marker["rows"]), 1),
            raw_bytes_per_example=round(
                sum(f.stat().st_size for f in (work / "build" / "codenetmut").rglob("*.arrow")) / max(1, rows), 1
            ),
        )
    elif name == "sampler":
        from codeexecutor.modeling.profiles import Profile
        from codeexecutor.modeling.tokenizer import Encoder, load_tokenizer
        from codeexecutor.training.config import Source, Stage
        from codeexecutor.training.data import StageData

        profile = Profile("exact", state="delta", order="end")
        enc = Encoder(load_tokenizer(str(work / "tokenizer"), delta=True), 256, 768, profile)
        data = StageData(Stage("s", [Source(str(work / "tokenized"), "codenet")], 10), enc, ".", max_tokens=6144)
        t = time.perf_counter()
        for step in range(2000):
            data.indices(0, step, 0, 0, 8)
        extra["indices_ms"] = round((time.perf_counter() - t) / 2000 * 1e3, 4)
        t = time.perf_counter()
        for step in range(300):
            data.batch(0, step, 0, 0, 8)
        extra["batch_ms"] = round((time.perf_counter() - t) / 300 * 1e3, 3)
    elif name == "first_step":
        import yaml

        cur = {
            "model": {
                "preset": "tiny",
                "tokenizer": str(work / "tokenizer"),
                "trace_state": "delta",
                "step_order": "end",
            },
            "train": {
                "output_dir": str(work / "run"),
                "max_tokens": 2048,
                "log_every": 1,
                "eval_examples": 0,
                "checkpoints": False,
            },
            "stages": [
                {
                    "name": "codenet",
                    "steps": 2,
                    "lr": 1e-4,
                    "warmup": 1,
                    "sources": [{"path": str(work / "tokenized"), "task": "codenet"}],
                }
            ],
        }
        (work / "cur.yaml").write_text(yaml.safe_dump(cur))
        shutil.rmtree(work / "run", ignore_errors=True)
        for key in ("seconds_to_first_step", "seconds_to_first_step_again"):  # a new run, then the same again
            shutil.rmtree(work / "run", ignore_errors=True)
            t = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "codeexecutor.training",
                    "--curriculum",
                    str(work / "cur.yaml"),
                    "--ds-config",
                    "ds_configs/cpu.json",
                    "--max-steps",
                    "1",
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-3000:])
            extra[key] = round(time.perf_counter() - t, 2)
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the trainer, the tokenizing workers
    own, workers = anon.stop()
    return {
        "peak_rss_mib": peak_rss_mib(),
        "peak_anon_mib": own,
        "children_peak_rss_mib": round(children, 1),
        "children_peak_anon_mib": workers,
        **extra,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--journal", help="a CodeNetMut build's journal.jsonl (the rows scaled up)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(run_phase(args.phase, pathlib.Path(args.work))))
        return
    if not args.journal or not os.path.isfile(args.journal):
        print(
            "bench_scale: pass --journal, a CodeNetMut build's journal.jsonl "
            "(codeexecutor build codenetmut ... --out DIR)",
            file=sys.stderr,
        )
        sys.exit(2)
    from codeexecutor.training.tokenized import train_curriculum_tokenizer  # noqa: F401  (imports checked up front)

    report: dict = {"journal": os.path.relpath(args.journal, ROOT.parent), "sizes": {}}
    with tempfile.TemporaryDirectory(dir=str(ROOT / "runs") if (ROOT / "runs").is_dir() else None) as tmp:
        base = pathlib.Path(tmp)
        tokenizer = base / "tokenizer"
        for n in sorted(args.sizes):
            work = base / str(n)
            (work / "build").mkdir(parents=True)
            written = synth_journal(pathlib.Path(args.journal), work / "build" / "journal.jsonl", n)
            shard_of = split_shards(work / "build" / "journal.jsonl", work / "shards", 4)
            if not tokenizer.exists():  # one tokenizer for every size: trained on the smallest build
                subprocess.run(
                    [sys.executable, __file__, "--phase", "finalize", "--work", str(work)],
                    check=True,
                    capture_output=True,
                    cwd=ROOT,
                )
                train_tokenizer_for(work, tokenizer)
            (work / "tokenizer").symlink_to(tokenizer)
            row = {"records": written, "shards": shard_of}
            for name in PHASES:
                row[name] = phase(name, work)
                print(f"N={n}: {name} {row[name]}", flush=True)
            report["sizes"][str(n)] = row
            shutil.rmtree(work / "merged", ignore_errors=True)
    sizes = sorted(report["sizes"], key=int)
    if len(sizes) > 1:
        lo, hi = report["sizes"][sizes[0]], report["sizes"][sizes[-1]]
        report["ratios_largest_to_smallest"] = {
            "rows": round(int(sizes[-1]) / int(sizes[0]), 1),
            **{f"{p}_seconds": round(hi[p]["seconds"] / max(lo[p]["seconds"], 1e-9), 2) for p in PHASES},
            **{f"{p}_peak_rss": round(hi[p]["peak_rss_mib"] / max(lo[p]["peak_rss_mib"], 1e-9), 2) for p in PHASES},
            **{f"{p}_held": round(held(hi[p]) / max(held(lo[p]), 1e-9), 2) for p in PHASES},
        }
    report["command"] = (
        "benchmarks/bench_scale.py --journal " + report["journal"] + " --sizes " + " ".join(map(str, sizes))
    )
    path = write_report("bench_scale", report)
    plot(report, path.with_suffix(".png"))
    print(f"report: {path}")


def split_shards(journal: pathlib.Path, out: pathlib.Path, k: int) -> int:
    """The journal's units dealt round-robin into `k` shard journals (as --shard I/N builds)."""
    files = []
    for i in range(k):
        (out / str(i)).mkdir(parents=True, exist_ok=True)
        files.append(open(out / str(i) / "journal.jsonl", "w", encoding="utf-8"))
    unit, pending = 0, []
    with open(journal, encoding="utf-8") as f:
        for line in f:
            pending.append(line)
            if '"_done"' in line:
                files[unit % k].writelines(pending)
                pending, unit = [], unit + 1
    for f in files:
        f.close()
    return k


def train_tokenizer_for(work: pathlib.Path, out: pathlib.Path) -> None:
    from codeexecutor.training.config import Curriculum
    from codeexecutor.training.tokenized import train_curriculum_tokenizer

    cur = Curriculum.from_dict(
        {
            "model": {"trace_state": "delta", "step_order": "end", "vocab_size": 8000},
            "train": {},
            "stages": [
                {
                    "name": "s",
                    "steps": 1,
                    "lr": 1e-4,
                    "sources": [{"path": str(work / "build" / "codenetmut"), "task": "codenet"}],
                }
            ],
        }
    )
    train_curriculum_tokenizer(cur, ".", str(out), sample=20_000)


def held(row: dict) -> float:
    """The memory a phase holds (MiB): its own anonymous peak, or its workers' together
    where they do the work (tokenizing processes, the trainer); a report from before the
    workers' anonymous memory was read gives their peak RSS."""
    workers = row.get("children_peak_anon_mib", row["children_peak_rss_mib"])
    return max(row.get("peak_anon_mib", row["peak_rss_mib"]), workers)


def plot(report: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(report["sizes"], key=int)
    ns = [int(s) for s in sizes]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for p in PHASES:
        line = a.plot(ns, [report["sizes"][s][p]["seconds"] for s in sizes], marker="o", label=p)[0]
        b.plot(ns, [held(report["sizes"][s][p]) for s in sizes], marker="o", color=line.get_color(), label=p)
        b.plot(ns, [report["sizes"][s][p]["peak_rss_mib"] for s in sizes], ls=":", color=line.get_color())
    for ax, what in ((a, "seconds"), (b, "MiB held (dotted: peak RSS)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("executed examples (rows)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    fig.suptitle("The data path against the number of rows (bench_scale.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
