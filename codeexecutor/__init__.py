"""codeexecutor: teach a transformer to execute Python.

This package must stay light to import: the sandbox workers import it and fork per
program, and forking a process that has imported torch is an order of magnitude slower.
Heavy modules (model, training) are imported by the subcommands that need them.
"""

__version__ = "0.1.0"
