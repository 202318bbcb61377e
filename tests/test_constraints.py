"""The name constraint (generation/constraints.py): it never forbids a true trace, and a
constrained search only names the program's identifiers."""

import re

import datasets
import torch

from codeexecutor.generation.constraints import RowConstraints, StateRule, identifiers, token_chars
from codeexecutor.generation.decoding import Decoding
from codeexecutor.modeling.format import parse_trace

from .conftest import texts


def _gold_path_allowed(rule: StateRule, ids: list[int]) -> bool:
    state = StateRule.start()
    for t in ids:
        allowed = rule.allowed(state)
        if allowed is not None and t not in allowed:
            return False
        state = rule.step(state, t)
    return True


def test_every_true_trace_of_the_demo_data_is_allowed(demo_data, overfit_model):
    from codeexecutor.modeling.tokenizer import load_tokenizer

    path, _ = overfit_model
    tok = load_tokenizer(str(path))
    checked = 0
    for name in ("singleline/singleline", "tutorial/tutorial", "codenetmut/codenetmut"):
        for row in datasets.load_from_disk(str(demo_data / name))["train"]:
            code, target = texts(row)
            ids = tok.encode(target, add_special_tokens=False)
            assert _gold_path_allowed(StateRule(tok, code, value_chars=103), ids), (name, target[:200])
            checked += " : " in target
    assert checked > 50  # traces with named values, not only empty states


def test_a_name_outside_the_code_or_named_twice_in_a_state_is_refused():
    from codeexecutor.modeling.tokenizer import train_tokenizer

    tok = train_tokenizer(["<state> ab : 1 <dictsep> abc : 2 </state>"] * 5, vocab_size=300, min_frequency=1)
    rule = StateRule(tok, "ab = 1\nabc = ab + 1\nfor x in y: pass")
    assert identifiers("for x in y: pass") == {"x", "y"}  # keywords are no names
    opened = rule.step(rule.start(), rule.state_open)
    first = rule.allowed(opened)
    assert tok.convert_tokens_to_ids("</state>") in first  # an empty state
    assert tok.encode("z", add_special_tokens=False)[0] not in first
    node = opened
    for t in tok.encode("ab", add_special_tokens=False):
        node = rule.step(node, t)
    after_ab = rule.allowed(node)
    assert rule.colon in after_ab and any(t != rule.colon for t in after_ab)  # `ab :` or `abc`
    value = rule.step(node, rule.colon)
    assert rule.allowed(value) is None  # the value is free
    again = rule.step(
        rule.step(value, tok.encode("1", add_special_tokens=False)[0]), tok.convert_tokens_to_ids("<dictsep>")
    )
    for t in tok.encode("ab", add_special_tokens=False):
        assert t in rule.allowed(again)  # towards `abc`, still free
        again = rule.step(again, t)
    assert rule.colon not in rule.allowed(again)  # `ab` is named once per state
    fresh = rule.step(rule.step(again, rule.state_close), rule.state_open)
    for t in tok.encode("ab", add_special_tokens=False):
        fresh = rule.step(fresh, t)
    assert rule.colon in rule.allowed(fresh)  # a new state may name it again


def _names(text: str) -> set[str]:
    return {name for step in parse_trace(text).steps for name in step.state}


def test_constrained_search_names_only_the_programs_identifiers(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    renamed = []
    for r in rows:
        names = sorted(_names(r["target"]))
        if names:  # the program with its first variable renamed: the memorised name is now wrong
            renamed.append(re.sub(rf"\b{re.escape(names[0])}\b", "zq", r["input"]))
    assert len(renamed) >= 5
    free = gen.generate(renamed, Decoding(beam=1, max_length=128, names=False, values=False))
    held = gen.generate(renamed, Decoding(beam=1, max_length=128, names=True, values=False))
    assert any(_names(o.text) - identifiers(i) for o, i in zip(free, renamed))  # the model writes names not in the code
    for o, i in zip(held, renamed):
        assert _names(o.text) <= identifiers(i), o.text
        for step in re.findall(r"<state>(.*?)</state>", o.text):
            named = [item.split(" : ")[0].strip() for item in step.split("<dictsep>") if " : " in item]
            assert len(named) == len(set(named)), step


def test_constraint_keeps_a_right_models_answers_and_both_search_paths_agree(overfit_model):
    from codeexecutor.generation import TraceGenerator

    path, rows = overfit_model
    gen = TraceGenerator(str(path))
    inputs = [r["input"] for r in rows]
    held = gen.generate(inputs, Decoding(beam=1, max_length=128, names=True, values=False))
    assert [parse_trace(o.text).steps for o in held] == [parse_trace(r["target"]).steps for r in rows]
    both = gen.generate(inputs, Decoding(beam=1, max_length=128, names=True, values=True))
    assert [o.text for o in both] == [o.text for o in held]  # no true value is longer than the tracer's limit
    fast = gen.generate(inputs[:4], Decoding(beam=3, max_length=64, names=True, values=True), batch_size=4)
    slow = gen.generate(inputs[:4], Decoding(beam=3, max_length=64, names=True, values=True), cache=False)
    assert [a.text for a in fast] == [b.text for b in slow]


def test_token_chars_add_up_to_the_decoded_length_of_any_text():
    from codeexecutor.modeling.tokenizer import train_tokenizer

    texts = [
        "<state> s : 'atcoder' </state>",
        "x : '日本語のテキスト' <dictsep> y : 'é' </state>",
        "<function> [0, 0, 0]",
    ]
    tok = train_tokenizer(texts * 3, vocab_size=300, min_frequency=1)
    chars = token_chars(tok)
    for text in texts + ["'naïve ☃ ü' 12345", "ünïcödé"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert sum(chars[i] for i in ids) == len(tok.decode(ids)), text


def test_a_value_ends_at_the_renderers_limit_and_not_before():
    from codeexecutor.modeling.tokenizer import train_tokenizer

    tok = train_tokenizer(["<state> s : 'atcoder' <dictsep> t : 1 </state>"] * 5, vocab_size=300, min_frequency=1)
    ends = {tok.convert_tokens_to_ids("<dictsep>"), tok.convert_tokens_to_ids("</state>")}
    for names in (True, False):
        rule = StateRule(tok, "s = input()\nt = 1", names=names, value_chars=12)
        state = rule.step(rule.start(), rule.state_open)
        for t in tok.encode("s :", add_special_tokens=False):
            state = rule.step(state, t)
        written = ""
        for t in tok.encode(" 'atcoderatcoderatcoder'", add_special_tokens=False):
            allowed = rule.allowed(state)
            if len(written) <= 12:  # the space and up to 12 characters: free
                assert allowed is None, (names, written)
            else:
                assert set(allowed) == ends, (names, written)
                break
            state = rule.step(state, t)
            written += tok.decode([t])
        else:
            raise AssertionError("the value was never stopped")
        nxt = rule.step(state, tok.convert_tokens_to_ids("<dictsep>"))
        for t in tok.encode("t :", add_special_tokens=False):
            nxt = rule.step(nxt, t)
        assert rule.allowed(nxt) is None  # the next value counts from 0
        rows = RowConstraints([rule], 1)
        rows.states = [state]
        logp = torch.zeros(1, len(tok))
        kept = (rows.mask(logp)[0] > -1).nonzero().flatten().tolist()
        assert set(kept) == ends
