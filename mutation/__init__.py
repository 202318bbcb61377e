"""Tree-sitter mutation engine: twelve operators that turn real programs into mutants (docs/mutation.md).

from mutation import mutate
for m in mutate(source, n=20, seed=0):
    m.code, m.operators, m.edits
"""

from mutation.engine import Mutant, MutationError, MutationStats, mutate, select_operators, token_form
from mutation.operators import LOOP_OPERATORS, OPERATORS, Operator, Site
from mutation.parsing import Edit

__all__ = [
    "Edit",
    "LOOP_OPERATORS",
    "Mutant",
    "MutationError",
    "MutationStats",
    "OPERATORS",
    "Operator",
    "Site",
    "mutate",
    "select_operators",
    "token_form",
]
