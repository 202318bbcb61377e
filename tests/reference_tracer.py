"""An independent minimal settrace reference (shares no code with codeexecutor): runs one
program from argv[1] with stdin from argv[2], prints JSON with the status, exception
type and line, stdout, the module-level line sequence and the final module globals."""

import io
import json
import sys
import types

src = open(sys.argv[1]).read()
sys.stdin = io.StringIO(open(sys.argv[2]).read())
out = io.StringIO()
lines = []


def tracer(frame, event, arg):
    if frame.f_code.co_filename != "<ref>":
        return None
    if frame.f_code.co_name == "<module>":

        def local(f, e, a):
            if e == "line":
                lines.append(f.f_lineno)
            return local

        return local
    return None


g = {"__name__": "__main__"}
status, exc = "ok", None
real_stdout = sys.stdout
sys.stdout = out
sys.settrace(tracer)
try:
    exec(compile(src, "<ref>", "exec"), g)
except SystemExit as e:
    status = "ok" if e.code in (None, 0) else "exit"
except BaseException as e:
    tb, line = e.__traceback__, None
    while tb:
        if tb.tb_frame.f_code.co_filename == "<ref>":
            line = tb.tb_lineno
        tb = tb.tb_next
    status, exc = "error", [type(e).__name__, line]
finally:
    sys.settrace(None)
    sys.stdout = real_stdout
final = {}
for k, v in g.items():
    if k.startswith("__") and k.endswith("__") or isinstance(v, types.ModuleType):
        continue
    try:
        final[k] = repr(v)
    except Exception:
        final[k] = None
print(json.dumps({"status": status, "error": exc, "stdout": out.getvalue(), "lines": lines, "final": final}))
