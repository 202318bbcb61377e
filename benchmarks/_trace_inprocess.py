"""Helper for bench_exec.py (not a public tool).

`python _trace_inprocess.py one PROGRAM STDIN`: trace one program in this fresh process
with the same Tracer the sandbox uses (the per-process baseline).
`python _trace_inprocess.py many LIST.json`: run each program in this process untraced and
traced, print total seconds of each as JSON (the tracing overhead).
"""

import io
import json
import sys
import time

from codeexecutor.execution.tracer import PROGRAM_FILENAME, make_tracer


class _Sink:
    pending = None  # output is not attached to steps here (the sandbox's sink does that)

    def take(self):
        return ""


def _stop():
    raise SystemExit


def _run(code, stdin: str, trace: bool):
    sys.stdin = io.StringIO(stdin)
    out = io.StringIO()
    sys.stdout = out
    tracer = make_tracer(1024, _Sink(), _stop)
    start = time.perf_counter()
    try:
        if trace:
            tracer.start(code)
        exec(code, {"__name__": "__main__"})
    except BaseException:
        pass
    finally:
        tracer.stop()
        sys.stdout = sys.__stdout__
    return time.perf_counter() - start, tracer


def main() -> None:
    if sys.argv[1] == "one":
        # The same work as a sandboxed run: trace, then hand the full trace back as JSON.
        source = open(sys.argv[2]).read()
        stdin = open(sys.argv[3]).read()
        _, tracer = _run(compile(source, PROGRAM_FILENAME, "exec"), stdin, True)
        tracer.close()
        json.dump({"steps": tracer.steps}, sys.__stdout__)
        return
    programs = json.load(open(sys.argv[2]))
    plain = traced = 0.0
    used = 0
    for source, stdin in programs:
        code = compile(source, PROGRAM_FILENAME, "exec")
        t_traced, tracer = _run(code, stdin, True)
        if len(tracer.steps) >= 1024:  # cut short by the step limit: not comparable
            continue
        plain += min(_run(code, stdin, False)[0] for _ in range(3))
        traced += min(t_traced, _run(code, stdin, True)[0], _run(code, stdin, True)[0])
        used += 1
    json.dump({"untraced_s": plain, "traced_s": traced, "programs": used}, sys.__stdout__)


if __name__ == "__main__":
    main()
