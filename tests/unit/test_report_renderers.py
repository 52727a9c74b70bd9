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
from tests.helpers import ROOT

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


@pytest.mark.parametrize("width", [80, 100])
def test_a_narrow_terminal_never_splits_an_address(width: int) -> None:
    import re

    report = _report("nft-nodeport")
    buf = io.StringIO()
    print_summary(Console(file=buf, width=width), report, "runs/nft-nodeport")
    text = buf.getvalue()
    words = {w for line in text.splitlines() for w in line.split()}
    from kpemu.report.runreport import representative

    hops = [h for f in report["flows"] if (c := representative(f)) for h in c["hops"]]
    addresses = {f"{h['src']}:{h['sport']}" for h in hops if h["sport"] is not None}
    assert addresses and addresses <= words, sorted(addresses - words)
    too_long = [ln for ln in text.splitlines() if len(ln) > width and " " in ln.strip()]
    assert not too_long, too_long
    assert re.search(r"^  1 client/eth0  10\.242\.72\.50:\d+ > 192\.168\.1\.100:30080 \[S\]$", text, re.M)
