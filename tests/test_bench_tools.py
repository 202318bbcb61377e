"""The bookkeeping of long measurements: bench_million's phase records, a run's curves."""

import os
import sys

import pytest

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

TRACE = "<line> <{k}> <state> a : {v} </state> <output> {v}\\n"
GNU_TIME_REPORT = """\tCommand being timed: "python -c 'print(1): 2'"
\tUser time (seconds): {user}
\tSystem time (seconds): 0.50
\tElapsed (wall clock) time (h:mm:ss or m:ss): {wall}
\tMaximum resident set size (kbytes): {rss}
\tExit status: {exit}
"""


def test_phase_records_sum_their_tries_and_a_failed_last_try_is_not_done(tmp_path):
    from bench_million import parse_time, summed

    (tmp_path / "time-shard0.txt").write_text(GNU_TIME_REPORT.format(user="10.0", wall="1:02:03.5", rss=2048, exit=0))
    assert parse_time(str(tmp_path / "time-shard0.txt")) == {
        "wall_s": 3723.5,
        "cpu_s": 10.5,
        "max_rss_mib": 2.0,
        "exit": 0,
    }
    (tmp_path / "time-shard1.txt").write_text(GNU_TIME_REPORT.format(user="1", wall="0:10.0", rss=4096, exit=0))
    (tmp_path / "time-shard1.1.txt").write_text('\tCommand being timed: "killed"\n')  # killed with time itself
    (tmp_path / "time-shard1.2.txt").write_text(GNU_TIME_REPORT.format(user="1", wall="0:20.0", rss=1024, exit=1))
    (tmp_path / "time-shard10.txt").write_text(GNU_TIME_REPORT.format(user="9", wall="9:00.0", rss=9999, exit=0))
    assert summed(tmp_path, "shard1") is None  # the last try failed: run it again (shard10's record is not shard1's)
    (tmp_path / "time-shard1.3.txt").write_text(GNU_TIME_REPORT.format(user="2", wall="0:30.0", rss=1024, exit=0))
    assert summed(tmp_path, "shard1") == {"wall_s": 60.0, "cpu_s": 5.5, "max_rss_mib": 4.0, "tries": 3}
    assert summed(tmp_path, "shard0")["tries"] == 1 and summed(tmp_path, "merge") is None


@pytest.mark.skipif(not os.path.exists("/usr/bin/time"), reason="GNU time is not installed")
def test_a_phase_runs_under_gnu_time_once_and_a_failure_names_its_log(tmp_path):
    from bench_million import run_phase

    ran = tmp_path / "ran"
    done = run_phase(tmp_path, "p", [sys.executable, "-c", f"open({str(ran)!r}, 'a').write('x')"])
    assert done["tries"] == 1 and done["wall_s"] >= 0
    assert run_phase(tmp_path, "p", [sys.executable, "-c", "raise SystemExit(3)"]) == done  # finished: not run again
    with pytest.raises(SystemExit, match="q failed .exit 3.; see .*q.out"):
        run_phase(tmp_path, "q", [sys.executable, "-c", "raise SystemExit(3)"])
    assert ran.read_text() == "x"


def test_curves_of_a_run_that_decoded_nothing_plot_without_a_warning(tmp_path):
    import json
    import warnings

    from codeexecutor.training.plots import plot_losses

    log = tmp_path / "train_log.jsonl"
    rows = [{"step": s, "stage": "codenet", "loss": 3.0 / s} for s in (1, 2, 3)]
    rows.append({"step": 3, "stage": "codenet", "eval": {"data/x": {"split": "valid", "loss": 1.5}}})  # loss only
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_losses(str(log), str(tmp_path / "loss.png"))
    assert (tmp_path / "loss.png").stat().st_size > 0
