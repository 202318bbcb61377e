"""codeexecutor/modeling/divergence.py: the class of the first step where a prediction leaves the gold."""

CODE = "def f(a):\n    b = a * 2\n    return b\nx = f(3)\nprint(x)\n"
GOLD = (
    "<line> <0> <state> f : <function> </state> <line> <1> <state> a : 3 <dictsep> b : 6 </state> "
    "<line> <2> <delta> </state> <line> <3> <state> f : <function> <dictsep> x : 6 </state> <output> 6\\n"
)


def _classify(pred: str, gold: str = GOLD):
    from codeexecutor.modeling.divergence import classify, steps

    return classify(steps(pred), steps(gold), CODE)


def test_each_kind_of_first_difference_gets_its_class():
    assert _classify(GOLD) is None
    assert _classify("<line> <0> <state> a : <function> </state>") == ("names", 0)
    assert _classify("<line> <0> <state> f : <function> </state> <line> <2> <state> a : 3 </state>") == ("line", 1)
    assert _classify(
        "<line> <0> <state> f : <function> </state> <line> <1> <state> a : 4 <dictsep> b : 6 </state>"
    ) == ("arguments", 1)
    assert _classify(
        GOLD.replace("<line> <2> <delta> </state>", "<line> <2> <state> a : 3 <dictsep> b : 6 </state>")
    ) == ("form", 2)
    assert _classify(GOLD.replace("x : 6", "x : 7")) == ("value", 3)
    assert _classify(GOLD.replace("f : <function> <dictsep> x", "f : 1 <dictsep> x")) == ("recall", 3)
    assert _classify(GOLD.replace("<output> 6", "<output> 7")) == ("output", 4)
    assert _classify(GOLD.rsplit(" <output>", 1)[0]) == ("end", 4)
