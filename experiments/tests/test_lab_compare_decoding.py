"""experiments/compare_decoding.py: decodings scored again on the examples they share."""

CLEAN = "<line> <1> <state> x : 1 </state> <line> <2> <state> x : 1 <dictsep> y : 2 </state> <output> 2\\n"
CRASH = "<line> <1> <state> x : 0 </state> <exception> <2> ZeroDivisionError"


def _row(dataset: str, id_: str, prediction: str, gold: str, finished: bool = True) -> dict:
    return {"dataset": dataset, "id": id_, "prediction": prediction, "gold": gold, "finished": finished}


def test_decodings_meet_on_shared_examples_and_score_crashes():
    from compare_decoding import compare

    crashes = {
        ("codenetmut", "a"): (None, None),
        ("codenetmut", "b"): (None, None),
        ("errors", "c"): ("ZeroDivisionError", 3),
        ("errors", "d"): ("ZeroDivisionError", 3),
    }  # 1-based, as TraceRecord counts
    wrong_line = CRASH.replace("<exception> <2>", "<exception> <1>")
    greedy = {
        ("codenetmut", "a"): _row("codenetmut", "a", CLEAN, CLEAN),
        ("codenetmut", "b"): _row(
            "codenetmut",
            "b",
            CLEAN.replace("y : 2 </state> <output> 2", "y : 3 </state> <output> 3"),
            CLEAN,
            finished=False,
        ),
        ("codenetmut", "z"): _row("codenetmut", "z", CLEAN, CLEAN),  # only greedy has it: left out
        ("errors", "c"): _row("errors", "c", CRASH, CRASH),
        ("errors", "d"): _row("errors", "d", CLEAN, CRASH),
    }
    beam = {
        ("codenetmut", "a"): _row("codenetmut", "a", CRASH, CLEAN),
        ("codenetmut", "b"): _row("codenetmut", "b", CLEAN, CLEAN),
        ("errors", "c"): _row("errors", "c", wrong_line, CRASH),
        ("errors", "d"): _row("errors", "d", CRASH, CRASH),
    }
    report = compare({"greedy": greedy, "beam": beam}, crashes, scored=lambda text: text)
    assert report["shared_examples"] == 4
    g, b = report["sets"]["codenetmut"]["greedy"], report["sets"]["codenetmut"]["beam"]
    assert (g["examples"], g["trace_accuracy"], g["cut"], g["outputs_right"]) == (2, 50.0, 50.0, 1)
    assert (b["trace_accuracy"], b["cut"], b["outputs_right"], b["printing"]) == (50.0, 0.0, 1, 2)
    gc, bc = report["crashes"]["codenetmut"]["greedy"], report["crashes"]["codenetmut"]["beam"]
    assert (gc["tp"], gc["fp"], gc["detection"], gc["localisation"]) == (1, 0, 75.0, 50.0)
    assert (bc["tp"], bc["fp"], bc["detection"], bc["localisation"]) == (2, 1, 75.0, 50.0)
    assert "functions" not in report["crashes"]  # a family is scored only where both its sets are there
