"""Generation: beam search with the release's rules over cached code keys/values
(`search`, `beam`), the `codeexecutor trace` command (`cli`) and its HTML view (`html`).

`TraceGenerator` is imported lazily, so that the CLI can register `trace` without
importing torch."""

from importlib import import_module

__all__ = ["Generated", "TraceGenerator"]


def __getattr__(name: str):
    if name in __all__:
        value = getattr(import_module("codeexecutor.generation.search"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'codeexecutor.generation' has no attribute {name!r}")
