"""Demo-size curriculum datasets built once per test session (from curricula/demo)."""

import pathlib

import pytest

from .conftest import ROOT


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> pathlib.Path:
    from curricula.codenet import CodeNetBuilder
    from curricula.singleline import build_singleline
    from curricula.tutorial import build_tutorial

    root = tmp_path_factory.mktemp("demo_data")
    demo = ROOT / "curricula" / "demo"
    CodeNetBuilder(str(demo), str(root / "codenetmut"), mutants=8, workers=2).run(progress=False)
    build_tutorial(str(root / "tutorial"), sources=str(demo / "tutorial"), mutants=8, workers=2, progress=False)
    build_singleline(str(root / "singleline"), source=str(root / "codenetmut"), workers=2)
    return root
