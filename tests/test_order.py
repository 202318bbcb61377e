"""The training order: what `pretrain` hands its training process, its curriculum checked once."""

import json

import pytest

from codeexecutor.errors import ConfigError
from codeexecutor.training.fallback import PATHS, TILES_EAGER, on_path, safer_paths
from codeexecutor.training.loop import main
from codeexecutor.training.order import TrainOrder

from .conftest import ROOT


def _order(tmp_path):
    """The demo curriculum's order, its dataset folders made (empty) under tmp_path, the base folder."""
    import yaml

    cur = ROOT / "curricula" / "demo.yaml"
    for stage in yaml.safe_load(cur.read_text())["stages"]:
        for src in stage["sources"]:
            (tmp_path / src["path"]).mkdir(parents=True, exist_ok=True)
    return TrainOrder.from_curriculum(str(cur), "ds_configs/cpu.json", str(tmp_path), str(tmp_path / "run"), (7, 1.5))


def test_an_order_comes_back_field_for_field(tmp_path):
    order = _order(tmp_path)
    back = TrainOrder.load(order.save(str(tmp_path / "order.json")))
    assert back == order  # dataclasses compare field by field, the stages' sources included
    assert back.curriculum.train.output_dir == str(tmp_path / "run") and (back.max_steps, back.minutes) == (7, 1.5)
    assert type(back.curriculum.stages[0].sources[0]).__name__ == "Source"


def test_a_safer_path_changes_the_attention_and_the_compile_and_nothing_else(tmp_path):
    order = _order(tmp_path)
    paths = safer_paths(order.curriculum)
    assert paths[0] is None and TILES_EAGER in paths
    assert on_path(order, None) is order
    eager = on_path(order, TILES_EAGER)
    assert (
        eager.curriculum.train.compile is False and eager.curriculum.model.attention == PATHS[TILES_EAGER]["attention"]
    )
    assert order.curriculum.train.compile == "auto"  # the order it came from is untouched
    assert eager.curriculum.stages == order.curriculum.stages and eager.curriculum.data == order.curriculum.data


def test_a_file_that_is_not_an_order_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"format": "codeexecutor-train-order/0"}))
    with pytest.raises(ConfigError, match="not a training order of this version"):
        TrainOrder.load(str(bad))
    with pytest.raises(ConfigError, match="cannot read the training order"):
        TrainOrder.load(str(tmp_path / "missing.json"))
    assert main(["--order", str(bad)]) == 2
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps({"format": "codeexecutor-train-order/1", "curriculum": {"model": {}}}))
    with pytest.raises(ConfigError, match="not a whole training order"):
        TrainOrder.load(str(cut))


def test_an_order_takes_no_second_set_of_options(tmp_path, capsys):
    path = _order(tmp_path).save(str(tmp_path / "order.json"))
    with pytest.raises(SystemExit) as stop:
        main(["--order", path, "--minutes", "3"])
    assert stop.value.code == 2 and "--order carries" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a zero is an option given too
        main(["--order", path, "--max-steps", "0"])
