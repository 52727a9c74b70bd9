"""`make bench` always runs to the end: a failing bench or a module that does not import is recorded as
FAILED with its error, the other benches still run, and the exit status is 0."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from scripts import bench


def test_a_failing_bench_is_recorded_and_the_others_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> list[dict[str, object]]:
        raise OSError(24, "Too many open files")

    def fine() -> list[dict[str, object]]:
        return [{"name": "boom.fine", "value": 1.0, "unit": "s"}]

    module = types.ModuleType("scripts.benches.boom")
    module.BENCHES = [broken, fine]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "scripts.benches.boom", module)
    monkeypatch.setattr(bench, "OUT", tmp_path / "bench.json")
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    assert bench.main(["boom", "no_such_bench_module"]) == 0
    records = {r["name"]: r for r in json.loads((tmp_path / "bench.json").read_text())}
    assert records["boom.broken"]["value"] == "FAILED"
    assert str(records["boom.broken"]["unit"]).startswith("OSError: [Errno 24] Too many open files (at ")
    assert records["boom.fine"]["value"] == 1.0
    assert records["no_such_bench_module"]["value"] == "FAILED"
    out = capsys.readouterr().out
    assert "FAILED boom.broken: OSError: [Errno 24] Too many open files" in out
    assert "1 records, 2 failed benches" in out
