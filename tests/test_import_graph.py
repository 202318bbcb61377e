"""The import graph of the product's packages has no circles, function-level imports counted
(a lazy import is still an arrow a reader follows)."""

import grimp

PACKAGES = ("codeexecutor", "mutation", "curricula", "eval")


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each module that lies on one (depth-first, three colours)."""
    found, colour, path = [], {}, []

    def visit(m: str) -> None:
        colour[m] = "grey"
        path.append(m)
        for d in sorted(edges.get(m, ())):
            if colour.get(d) == "grey":
                found.append(path[path.index(d) :] + [d])
            elif d not in colour:
                visit(d)
        path.pop()
        colour[m] = "black"

    for m in sorted(edges):
        if m not in colour:
            visit(m)
    return found


def test_circles_are_found_where_there_are_some():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"b"}}) == []


def test_the_product_has_no_import_circles():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert circles(edges) == []
