"""A flow's hop table pinned in a document (kpemu.report.pin, `kpemu runs show/check`) and what CI reads
from a run (kpemu.report.ci): whole expected text from a recorded run."""

from __future__ import annotations

import gzip
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kpemu.errors import InputError
from kpemu.report.ci import ScenarioResult, github_annotations, junit_xml, tally
from kpemu.report.pin import check_block, find_flow, flow_markdown, pinned_keys, write_block
from tests.helpers import ROOT, cli

RECORDED = ROOT / "tests" / "data" / "reports" / "nft-nodeport.json.gz"
STICKY = """\
**nft-nodeport / sticky-clusterip**: client-0 -> 10.96.0.30:80 (TCP), reply x3

| hop | where | src | dst | what changed | by |
| --- | --- | --- | --- | --- | --- |
| 1 | client-0/eth0 | 10.244.0.3:<port> | 10.96.0.30:80 [S] |  |  |
| 2 | node1/vethc1c5a883 | 10.244.0.3:<port> | 10.96.0.30:80 [S] |  |  |
| 3 | node1/veth24d07f86 | 10.244.0.3:<port> | 10.244.0.2:80 [S] | DNAT dst 10.96.0.30:80 -> 10.244.0.2:80 | \
node1: DNAT by endpoint-I2JGFBWB-default/sticky/tcp/http__10.244.0.2/80 (via element { 10.96.0.30 . tcp . 80 : \
goto service-H6U4RGLG-default/sticky/tcp/http } of map service-ips; numgen arm 0 : goto \
endpoint-I2JGFBWB-default/sticky/tcp/http__10.244.0.2/80 (1 in 2)) |
| 4 | web-0/eth0 | 10.244.0.3:<port> | 10.244.0.2:80 [S] |  |  |
| r1 | web-0/eth0 | 10.244.0.2:80 | 10.244.0.3:<port> [S.] |  |  |
| r2 | node1/veth24d07f86 | 10.244.0.2:80 | 10.244.0.3:<port> [S.] |  |  |
| r3 | node1/vethc1c5a883 | 10.96.0.30:80 | 10.244.0.3:<port> [S.] | un-DNAT src 10.244.0.2:80 -> 10.96.0.30:80 | \
node1: reverse NAT by conntrack tcp 10.244.0.3:<port> -> 10.96.0.30:80 reply 10.244.0.2:80 -> 10.244.0.3:<port> |
| r4 | client-0/eth0 | 10.96.0.30:80 | 10.244.0.3:<port> [S.] |  |  |
"""


def _report() -> dict:
    return json.loads(gzip.decompress(RECORDED.read_bytes()))


def test_pinned_table_masks_only_the_client_port() -> None:
    report = _report()
    assert flow_markdown(report, find_flow(report, "sticky-clusterip")) == STICKY
    port = str(find_flow(report, "sticky-clusterip")["connections"][0]["hops"][0]["sport"])
    assert f"10.244.0.3:{port}" in flow_markdown(report, find_flow(report, "sticky-clusterip"), stable=False)


def test_flow_must_be_named_when_several() -> None:
    with pytest.raises(InputError, match=r"has 5 flows .*name one with --flow"):
        find_flow(_report(), None)
    with pytest.raises(InputError, match=re.escape("no flow 'nope' (its flows: external-to-nodeport, ")):
        find_flow(_report(), "nope")


def test_block_written_replaced_and_checked() -> None:
    doc = write_block("# NodePort\n", "np", "sticky", "old\n")
    assert doc == "# NodePort\n\n<!-- kpemu runs show np --flow sticky -->\nold\n<!-- /kpemu -->\n"
    assert write_block(doc + "after\n", "np", "sticky", "new\n") == doc.replace("old", "new") + "after\n"
    assert pinned_keys(doc) == [("np", "sticky")]
    assert check_block(doc, "d.md", "np", "sticky", "old\n") == ""
    assert check_block(doc, "d.md", "np", "sticky", "new\n") == (
        "--- d.md (pinned)\n+++ runs/np (this run)\n@@ -1 +1 @@\n-old\n+new\n")
    with pytest.raises(InputError, match=re.escape("d.md: no pinned block <!-- kpemu runs show np --flow other -->")):
        check_block(doc, "d.md", "np", "other", "x\n")


def test_runs_show_write_and_check_through_the_cli(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "np"
    run.mkdir(parents=True)
    (run / "hops.json").write_bytes(gzip.decompress(RECORDED.read_bytes()))
    doc = tmp_path / "doc.md"
    doc.write_text("# Sticky ClusterIP\n")
    runs = str(tmp_path / "runs")
    r = cli("runs", "show", "np", "--flow", "sticky-clusterip", "--dir", runs, "--write", str(doc))
    assert r.returncode == 0, r.stderr
    assert doc.read_text() == ("# Sticky ClusterIP\n\n<!-- kpemu runs show np --flow sticky-clusterip -->\n"
                               + STICKY + "<!-- /kpemu -->\n")
    assert cli("runs", "check", "--dir", runs, str(doc)).stdout == f"{doc}: np / sticky-clusterip as pinned\n"
    doc.write_text(doc.read_text().replace("un-DNAT", "un-SNAT"))
    r = cli("runs", "check", "--dir", runs, str(doc))
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == (
        f"{doc}: the hop table of np / sticky-clusterip changed; if the change is meant, update it with "
        f"kpemu runs show np --flow sticky-clusterip --dir {runs} --write {doc}")
    assert "-| r3 | node1/vethc1c5a883 | 10.96.0.30:80 | 10.244.0.3:<port> [S.] | un-SNAT" in r.stdout
    assert "+| r3 | node1/vethc1c5a883 | 10.96.0.30:80 | 10.244.0.3:<port> [S.] | un-DNAT" in r.stdout


RESULTS = [
    ScenarioResult("good", "scenarios/good.yaml", 0, 1.5, [{"flow": "f", "what": "outcome", "ok": True,
                                                           "expected": "reply", "seen": "reply x3", "diff": ""}]),
    ScenarioResult("bad", "scenarios/bad.yaml", 1, 2.0, [{"flow": "g", "what": "outcome", "ok": False,
                                                         "expected": "reply", "seen": "dropped x1", "diff": ""}]),
    ScenarioResult("broken", "scenarios/broken.yaml", 2, error="scenarios/broken.yaml: flows[0].to: no service x\n"
                   "(fix: name a Service of the topology)"),
]


def test_tally_follows_the_exit_code() -> None:
    assert tally(RESULTS[:1], [], 0) == "PASS: 1/1 scenarios passed, exit code 0"
    assert tally(RESULTS, ["ipvs-one"], 2) == (
        "FAIL: 1/3 scenarios passed (failed: bad, broken), 1 skipped (ipvs-one), exit code 2")
    assert tally(RESULTS[:1], [], 3).startswith("FAIL: 1/1")


def test_junit_has_a_case_per_check_and_an_error_for_a_stopped_scenario() -> None:
    root = ET.fromstring(junit_xml(RESULTS))
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures"), s.get("errors")) for s in suites] == [
        ("good", "1", "0", "0"), ("bad", "1", "1", "0"), ("broken", "1", "0", "1")]
    [fail] = root.iter("failure")
    assert fail.get("message") == "expected reply, seen dropped x1"
    assert fail.text == "expected: reply\nseen:     dropped x1"
    [err] = root.iter("error")
    assert err.get("message") == "scenarios/broken.yaml: flows[0].to: no service x"


def test_github_annotations_escape_what_the_workflow_syntax_reserves() -> None:
    assert github_annotations(RESULTS) == [
        "::error file=scenarios/bad.yaml,title=kpemu bad / g%3A outcome::expected: reply%0Aseen:     dropped x1",
        "::error file=scenarios/broken.yaml,title=kpemu broken::scenarios/broken.yaml: flows[0].to: no service x"
        "%0A(fix: name a Service of the topology)",
    ]
