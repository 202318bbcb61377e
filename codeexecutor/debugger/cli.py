"""`codeexecutor debug prog.py`: the neural debugger at a prompt with pdb's habits, or a
script of actions (`--do "b 12; c; n; p x"`) answered as JSON lines, one an action."""

from __future__ import annotations

import argparse
import json
import os
import shlex

from codeexecutor.errors import UsageError

HELP = """commands (pdb's habits; the model answers each, the real run is set beside it):
  b LINE        break at LINE (the state shown is the one after the line ran)
  c [LINE]      continue to the next hit of LINE, or of any breakpoint
  s             step: the next event, into calls
  n             next: the next event in this frame (a call's own steps skipped)
  r             return: out of this call, to the caller's state
  p [NAME]      print the state, or one variable of it
  set NAME = V  change a variable here; the walk then follows the model alone
  back          undo the last action
  real          the real run here beside the walk, and where the model's own trace parts from it
  crash         will the program crash, how and where (the crash detector's verdict, else the trace's)
  q             quit"""


def _args(p: argparse.ArgumentParser) -> None:
    from codeexecutor.debugger.session import DEFAULT_MODEL

    p.add_argument("program", help="the Python program")
    given = p.add_mutually_exclusive_group()
    given.add_argument("--stdin", metavar="FILE", help="its standard input (inlined, as the model reads it)")
    given.add_argument("--call", metavar="EXPR", help='a call to run after the program\'s definitions, e.g. "f(3)"')
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"the model (default {DEFAULT_MODEL})")
    p.add_argument(
        "--do",
        metavar="SCRIPT",
        help='actions separated by ";" (e.g. "b 12; c; n; p x"; a value set here cannot hold a ";"): JSON lines out',
    )
    p.add_argument("--no-real", action="store_true", help="do not run the program: the model predicts from its start")
    p.add_argument(
        "--actions",
        choices=("imposed", "taught"),
        help="walk the model's whole trace to where next, out and continue land (imposed, the default), or ask "
        "them as trained tasks, one step after the action's marker (taught: a model trained on them)",
    )
    p.add_argument(
        "--inputs-for",
        metavar="OUTPUT",
        help="inverse execution: inputs that make the program print OUTPUT (--stdin FILE: an example input, "
        "its shape) or the --call function return OUTPUT (--call f, or an example call); the model ranks "
        "candidates, the sandbox checks the first --top: JSON lines out",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the session to the trace viewer when it ends: one step an action, the model's landing "
        "beside the real one",
    )
    p.add_argument(
        "--fill",
        nargs="?",
        const="model",
        metavar="PREDICTOR",
        help="guide the real run of a snippet that lacks values (exec --fill): empty, dummy, frequency or a "
        "value model folder; alone, the shipped value model. The injections are in the notes and `real`",
    )
    p.add_argument("--candidates", type=int, default=32, help="inputs proposed for --inputs-for (default 32)")
    p.add_argument("--top", type=int, default=5, help="ranked inputs run in the sandbox (default 5)")


def _run(args: argparse.Namespace) -> int:
    from codeexecutor.debugger.session import Session
    from codeexecutor.source import read_program, read_text_file

    source = read_program(args.program)
    stdin = read_text_file(args.stdin, "--stdin file") if args.stdin else ""
    if args.inputs_for is not None:
        if args.do is not None or args.html or args.no_real:
            raise UsageError("--inputs-for runs no session: leave --do, --html and --no-real out")
        return _inverse(args, source, stdin)
    if args.html and os.path.isdir(args.html):
        raise UsageError(f"--html {args.html} is a folder; name the page's file, e.g. session.html")
    if args.html and not os.path.isdir(os.path.dirname(os.path.abspath(args.html))):
        raise UsageError(f"--html {args.html}: its folder does not exist; make it first or name another")
    if args.fill is not None and args.no_real:
        raise UsageError("--fill guides the real run and --no-real asks for none: give one of them")
    session = Session(source, stdin, args.call, args.model, real=not args.no_real, actions=args.actions, fill=args.fill)
    taken: list[tuple[str, dict]] = []
    try:
        return _script(session, args.do, taken) if args.do is not None else _prompt(session, taken)
    finally:
        if args.html:
            _write_page(args.html, session, taken, args.program)


def _write_page(path: str, session, taken: list, program: str) -> None:
    from codeexecutor.atomic import write_text
    from codeexecutor.debugger.page import session_page
    from codeexecutor.generation.html import render_page

    data = session_page(session.code, taken, session.breakpoints, f"debugger session of {os.path.basename(program)}")
    data["injections"] = session.injections
    write_text(path, render_page(data))
    print(f"page: {path}")


def _inverse(args: argparse.Namespace, source: str, stdin: str) -> int:
    """`--inputs-for`: the checked candidates, best first, then a summary line."""
    from codeexecutor.debugger.inverse import Tries, inputs_for
    from codeexecutor.generation.api import cached_generator

    if not 1 <= args.top <= args.candidates:
        raise UsageError(f"--top {args.top} --candidates {args.candidates}: --top runs 1 to --candidates of them")
    found = inputs_for(
        cached_generator(args.model), source, args.inputs_for, args.call, stdin, Tries(args.top, args.candidates)
    )
    for rank, c in enumerate(found["ranked"][: args.top], 1):
        print(json.dumps({"rank": rank, **c}), flush=True)
    summary = {k: v for k, v in found.items() if k != "ranked"}
    print(json.dumps({"action": "inputs_for", **summary}), flush=True)
    return 0


def act(session, command: str) -> dict | None:
    """One command line on a session: its answer (None for `q`). Bad input raises UsageError."""
    words = command.strip().split(None, 1)
    if not words:
        return {"action": "none"}
    verb, rest = words[0], (words[1] if len(words) > 1 else "").strip()
    if verb in ("q", "quit", "exit"):
        return None
    if verb in ("s", "step"):
        return session.step()
    if verb in ("n", "next"):
        return session.next()
    if verb in ("r", "return", "out"):
        return session.out()
    if verb in ("c", "cont", "continue"):
        return session.run_to(_line(rest) if rest else None)
    if verb in ("b", "break"):
        if not rest:
            return {"action": "break", "breakpoints": sorted(session.breakpoints)}
        return session.add_breakpoint(_line(rest))
    if verb in ("p", "print"):
        if not rest:
            return {"action": "print", "line": session.line, "state": session.state}
        if rest not in session.state:
            known = ", ".join(session.state) or "none yet"
            raise UsageError(f"p {rest}: no variable {rest} in this frame's state (it has: {known})")
        return {"action": "print", "name": rest, "value": session.state[rest], "line": session.line}
    if verb == "set":
        name, eq, value = rest.partition("=")
        if not eq or not value.strip():
            raise UsageError("set: write `set NAME = VALUE`, e.g. set x = 3")
        return session.set(name.strip(), value)
    if verb == "back":
        return session.back()
    if verb == "real":
        return session.real()
    if verb == "crash":
        return session.crash()
    if verb in ("h", "help"):
        return {"action": "help", "text": HELP}
    raise UsageError(f"unknown command {verb!r}: one of b, c, s, n, r, p, set, back, real, crash, q (help lists them)")


def _line(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{text!r} is not a line number: give one, e.g. b 12") from None


def _script(session, script: str, taken: list) -> int:
    """Each action of the script as a JSON line; a bad one gets an `error` line and the
    script goes on, as it would at the prompt."""
    print(
        json.dumps({"action": "start", "notes": session.notes, "walk": "real" if session.walk_is_real else "predicted"})
    )
    for command in script.split(";"):
        try:
            answer = act(session, command)
        except UsageError as exc:
            answer = {"action": command.strip(), "error": str(exc)}
        if answer is None:
            break
        if answer.get("action") != "none":
            taken.append((command, answer))
            print(json.dumps(answer, ensure_ascii=False), flush=True)
    return 0


def _prompt(session, taken: list) -> int:
    for note in session.notes:
        print(f"note: {note}")
    print("(the model's debugger; `help` lists the commands)")
    while True:
        try:
            command = input("(codeexecutor) ")
        except EOFError:
            print()
            return 0
        try:
            answer = act(session, command)
        except UsageError as exc:
            print(f"*** {exc}")
            continue
        if answer is None:
            return 0
        taken.append((command, answer))
        print(describe(answer))


def describe(answer: dict) -> str:
    """An answer as a person reads it at the prompt."""
    if "text" in answer:
        return answer["text"]
    if answer.get("action") == "break":
        return "breakpoints at lines " + ", ".join(map(str, answer["breakpoints"])) if answer["breakpoints"] else "none"
    parts = []
    if "predicted" in answer:
        parts.append("model:  " + _event(answer["predicted"], answer.get("predicted_end")))
    if answer.get("real") is not None or "real_end" in answer:
        parts.append("real:   " + _event(answer.get("real"), answer.get("real_end")))
        if "agree" in answer:
            parts[-1] += "   (agree)" if answer["agree"] else "   (differ)"
    if answer.get("parted"):
        p = answer["parted"]
        parts.append(f"the model's own trace first parts from the real run at event {p['event']} ({p['kind']})")
    elif "parted" in answer:
        parts.append("the model's own trace agrees with the real run throughout")
    if "value" in answer:
        parts.append(f"{answer['name']} = {answer['value']}")
    if answer.get("note"):
        parts.append(answer["note"])
    where = answer.get("line")
    if not parts or answer.get("action") in ("back", "set", "print"):
        parts.append(f"> line {where}: " + shlex.join(f"{k}={v}" for k, v in (answer.get("state") or {}).items()))
    return "\n".join(parts)


def _event(event: dict | None, end: str | None) -> str:
    if event is None:
        return end or "-"
    if event.get("exception"):
        return f"line {event['line']} raises {event['exception']}"
    state = ", ".join(f"{k}: {v}" for k, v in event["state"].items())
    printed = f"  prints {event['output']!r}" if event.get("output") else ""
    return f"line {event['line']}  {{{state}}}{printed}"


COMMANDS = {
    "debug": (
        "walk a program with pdb's actions, each answered by the model beside the real run",
        _args,
        _run,
    ),
}
