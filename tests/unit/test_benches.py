"""Every benchmark module of `make bench` imports and lists its benches (a refactor that breaks one is
caught here, not at the next `make bench`)."""

from __future__ import annotations

import importlib

import pytest

from tests.helpers import ROOT

BENCHES = sorted(p.stem for p in (ROOT / "scripts" / "benches").glob("*.py")
                 if p.stem != "__init__")


@pytest.mark.parametrize("name", BENCHES)
def test_bench_module_imports_and_lists_callables(name: str) -> None:
    module = importlib.import_module(f"scripts.benches.{name}")
    assert module.BENCHES and all(callable(b) for b in module.BENCHES)
