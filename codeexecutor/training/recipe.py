"""A recipe: a curriculum (model, train, stages) with three more sections, `data` (where the
datasets live and how to build the missing ones), `tokenizer` (the sample it is trained on)
and `score` (what the model is scored on). Read from YAML with `--set` overrides applied;
`data_part` is what its data phases depend on (codeexecutor/pretrain.py runs them)."""

from __future__ import annotations

from codeexecutor.errors import ConfigError
from codeexecutor.training.config import Curriculum


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`section.field=value` set on a recipe's mapping, values read as YAML:
    `model.preset=small`, `data.builds.codenetmut.mutants=3`, a stage by its name
    (`stages.codenet.steps=100`), and one of its sources by its index or its path, whole or
    its last part (`stages.codenet.sources.errors.weight=0.3`; a weight of 0 leaves the
    source out), or the whole list of stages (`stages=[...]`)."""
    import yaml

    for item in overrides:
        key, sep, value = item.partition("=")
        parts = key.split(".")
        if sep and parts == ["stages"]:  # the whole list of stages
            raw["stages"] = yaml.safe_load(value)
            continue
        if not sep or len(parts) < 2:
            raise ConfigError(f"--set {item}: write SECTION.FIELD=VALUE, e.g. --set model.preset=small")
        node = raw
        if parts[0] == "stages" and len(parts) in (3, 5):
            node = next((st for st in raw.get("stages") or [] if st.get("name") == parts[1]), None)
            if node is None:
                raise ConfigError(f"--set {item}: the recipe has no stage {parts[1]!r}")
            if len(parts) == 5 and parts[2] == "sources":
                sources = node.get("sources") or []
                node = _source(sources, parts[3], item, parts[1])
                if parts[4] == "weight" and yaml.safe_load(value) == 0:
                    sources.remove(node)
                    continue
            elif len(parts) == 5:
                raise ConfigError(
                    f"--set {item}: a stage's field is stages.STAGE.FIELD or stages.STAGE.sources.SOURCE.FIELD"
                )
            parts = parts[-1:]
        else:
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"--set {item}: {part} is not a section")
        node[parts[-1]] = yaml.safe_load(value)
    return raw


def _source(sources: list[dict], name: str, item: str, stage: str) -> dict:
    """The one source of a stage that `name` means: its index, its path, or its path's last part."""
    if name.isdigit() and int(name) < len(sources):
        return sources[int(name)]
    found = [src for src in sources if src.get("path") == name or str(src.get("path", "")).rsplit("/", 1)[-1] == name]
    if len(found) != 1:
        paths = ", ".join(f"{i}: {src.get('path')}" for i, src in enumerate(sources))
        raise ConfigError(
            f"--set {item}: stage {stage} has {'no' if not found else 'several'} source {name!r}; "
            f"name one by its index or path ({paths})"
        )
    return found[0]


def load_recipe(path: str, base_dir: str | None, overrides: list[str] = ()) -> tuple[Curriculum, dict]:
    """(the recipe as a Curriculum, its mapping with the overrides applied); every problem
    in one ConfigError. `base_dir` None: its dataset and build folders are not looked for
    (a pack of committed data builds nothing)."""
    import yaml

    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"recipe not found: {path} (see curricula/recipes/)") from exc
    except (IsADirectoryError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path} is not a recipe YAML file ({str(exc).splitlines()[0]}); see curricula/recipes/"
        ) from exc
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path} is not a recipe: expected a mapping with model, train and stages (see curricula/recipes/)"
        )
    raw = apply_overrides(raw, list(overrides))
    return Curriculum.from_dict(raw, path, base_dir, buildable=True), raw


def data_part(raw: dict) -> dict:
    """What a recipe's data phases (build, tokenizer, tokenize) depend on: everything but the
    schedule (`train`, `score`, and of the stages their sources' paths and tasks only). Two
    recipes with the same data part share their datasets, tokenizer and tokens."""
    sources = sorted(
        {
            (str(src.get("path")), str(src.get("task")))
            for st in raw.get("stages") or []
            for src in st.get("sources") or []
        }
    )
    return {**{k: v for k, v in raw.items() if k not in ("train", "score", "stages")}, "sources": sources}
