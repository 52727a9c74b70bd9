"""report.md and the terminal summary render from the one hops.json document (kpemu.report.runreport),
so a saved run renders as it did when it ran: whole expected text, from recorded runs."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from rich.console import Console

from kpemu.report.markdown import render_markdown
from kpemu.report.runreport import RunReport
from kpemu.report.terminal import print_summary
from tests.conftest import ROOT

REPORTS = ROOT / "tests" / "data" / "reports"
RENDERED = REPORTS / "rendered"


def _report(name: str) -> RunReport:
    return json.loads(gzip.decompress((REPORTS / f"{name}.json.gz").read_bytes()))


@pytest.mark.parametrize("name", sorted(p.stem for p in RENDERED.glob("*.md")))
def test_report_md_of_a_recorded_run(name: str) -> None:
    assert render_markdown(_report(name)) == (RENDERED / f"{name}.md").read_text()


@pytest.mark.parametrize("name", sorted(p.stem for p in RENDERED.glob("*.txt")))
def test_terminal_summary_of_a_recorded_run(name: str) -> None:
    console = Console(record=True, width=180, file=io.StringIO())
    print_summary(console, _report(name), "runs/x")
    assert console.export_text() == (RENDERED / f"{name}.txt").read_text()
