"""A hop table pinned from one real run is the same after another real run of the same scenario
(`kpemu runs show --write`, `kpemu runs check`), and the last line of `kpemu run` agrees with its exit
code and its JUnit file."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import SCENARIOS, cli, needs_root

pytestmark = [needs_root, pytest.mark.root]


def test_pinned_table_survives_a_second_run(tmp_path: Path) -> None:
    runs, doc, junit = tmp_path / "runs", tmp_path / "doc.md", tmp_path / "junit.xml"
    scenario = str(SCENARIOS / "nft-nodeport.yaml")
    first = cli("run", scenario, "--out", str(runs / "np"), "--no-trace", "--junit", str(junit))
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.rstrip().splitlines()[-1] == "PASS: 1/1 scenarios passed, exit code 0"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "0" and int(suite.get("tests") or 0) > 5
    # ETP Local with one endpoint on the node: one backend, so one table.
    w = cli("runs", "show", "np", "--flow", "local-with-endpoint", "--dir", str(runs), "--write", str(doc))
    assert w.returncode == 0 and "note:" not in w.stdout, w.stdout
    second = cli("run", scenario, "--out", str(runs / "np"), "--no-trace")
    assert second.returncode == 0, second.stdout + second.stderr
    check = cli("runs", "check", "--dir", str(runs), str(doc))
    assert (check.returncode, check.stdout) == (0, f"{doc}: np / local-with-endpoint as pinned\n")
