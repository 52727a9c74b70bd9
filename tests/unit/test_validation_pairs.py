"""Validation errors as input/expected pairs: tests/data/invalid/<case>.yaml is a topology with one
mistake (its first line says which), <case>.err is the whole of what `kpemu validate` must print on
stderr for it ({file} standing for the path), with exit code 2 and the count on stdout."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpemu.cli import main
from tests.helpers import ROOT

CASES = sorted((ROOT / "tests" / "data" / "invalid").glob("*.yaml"))


def test_every_input_has_its_expected_output() -> None:
    assert len(CASES) >= 10
    assert all(c.with_suffix(".err").is_file() for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_validate_prints_exactly_the_expected_error(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(case)])
    out, err = capsys.readouterr()
    assert (code, out, err.replace(str(case), "{file}")) == (2, "0 of 1 file(s) valid\n",
                                                             case.with_suffix(".err").read_text())
