"""Tree-sitter mutation engine: twelve operators that turn real programs into executed mutants (SPEC §4)."""
