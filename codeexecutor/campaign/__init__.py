"""A GPU draw as a product path: pack a recipe's data here (`pack.py`, `ids.py`, `wheels.py`),
run the draw's steps on the lent machine (`draw.py`, `steps.py`, `checks.py`), bring the
model back and ship it (`unpack.py`, `ship.py`). `cli.py` adds `codeexecutor draw` and
`codeexecutor ship`; docs/gpu-draw.md tells the whole path."""
