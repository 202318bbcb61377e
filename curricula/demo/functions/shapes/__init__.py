"""A small built-in package with doctests and tests: the demo's functions corpus."""
