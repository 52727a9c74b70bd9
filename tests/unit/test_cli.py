"""CLI conventions: --version, an example in every subcommand's help, -o json|yaml|table (and the older
--json) on every command that reports something, validate reporting every problem of every file,
example:NAME references, runs listed from their hops.json."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kpemu.cli import build_parser, main
from tests.helpers import ROOT

REPORTING = [["validate", "x.yaml"], ["rules", "t.yaml", "--node", "n"], ["doctor"], ["inspect"], ["vm", "status"],
             ["graph", "t.yaml"], ["runs"], ["examples"], ["schema", "topology"]]


Sub = tuple[tuple[str, ...], argparse.ArgumentParser]


def _subparsers(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Sub]:
    out = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                out.append(((*path, name), sp))
                out += _subparsers(sp, (*path, name))
    return out


def test_version_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("kpemu ")


def test_every_subcommand_shows_an_example() -> None:
    subs = _subparsers(build_parser())
    assert len(subs) >= 16
    for path, sp in subs:
        assert sp.epilog and "examples:\n  " in sp.epilog, f"kpemu {' '.join(path)} --help has no example"
        assert any(f"kpemu {path[0]}" in line for line in sp.epilog.splitlines()[1:]), path
    helps = {path: sp.format_help() for path, sp in subs}
    assert "-- CMD" in helps[("exec",)] and "-- CMD" in helps[("vm", "exec")] and "-- CMD" in helps[("deploy",)]


@pytest.mark.parametrize("argv", REPORTING, ids=[" ".join(a[:2]) for a in REPORTING])
def test_reporting_commands_take_output_and_json(argv: list[str]) -> None:
    p = build_parser()
    for fmt in ("json", "yaml", "table"):
        assert p.parse_args([*argv, "-o", fmt]).output == fmt
    assert p.parse_args([*argv, "--json"]).output == "json"
    assert p.parse_args(argv).output == "table"


def test_validate_checks_every_file_and_reports_every_problem(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncni: nope\n")
    rc = main(["validate", str(bad), "example:nodeport-ipvs", "example:no-such", "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2
    assert [r["ok"] for r in out] == [False, True, False]
    assert len(out[0]["problems"]) >= 2 and {p["field"] for p in out[0]["problems"]} >= {"cni", "nodes"}
    assert out[1]["kind"] == "scenario" and "no example of that name" in out[2]["problems"][0]["message"]
    assert main(["validate", "example:nodeport-ipvs", "example:calico-ipip"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 of 2 file(s) valid"


def test_examples_list_shipped_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["examples", "-o", "yaml"]) == 0
    rows = yaml.safe_load(capsys.readouterr().out)
    names = {r["name"]: r for r in rows}
    assert names["nodeport-ipvs"]["kind"] == "scenario" and names["calico-ipip"]["kind"] == "topology"
    assert Path(names["nodeport-ipvs"]["path"]).read_text() == (ROOT / "scenarios" / "nodeport-ipvs.yaml").read_text()


def test_rules_and_graph_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "example:calico-ipip", "--node", "node1", "--format", "ipvs", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["node"] == "node1" and data["mode"] == "ipvs" and "-A -t 10.246.198.17:30080 -s rr" in data["ipvs"]
    assert main(["graph", "example:flannel-vxlan", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["graph"].startswith("flowchart")


def test_runs_lists_and_opens_past_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, ok in (("a", True), ("cmp/ipvs", False)):
        d = tmp_path / name
        d.mkdir(parents=True)
        (d / "hops.json").write_text(json.dumps({"scenario": name.split("/")[0], "ok": ok, "seconds": 2.5,
                                                 "runtime": "host", "flows": []}))
        (d / "report.md").write_text(f"# {name}\n")
    assert main(["runs", "--dir", str(tmp_path), "-o", "json"]) == 0
    runs = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert runs["a"]["result"] == "PASS" and runs["cmp/ipvs"]["result"] == "FAIL" and runs["a"]["seconds"] == 2.5
    assert main(["runs", "open", "ipvs", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "# cmp/ipvs\n"
    assert main(["runs", "open", "zzz", "--dir", str(tmp_path)]) == 2
    assert "no run 'zzz'" in capsys.readouterr().err


def test_progress_is_plain_lines_when_not_a_terminal() -> None:
    code = ("from kpemu.cli.base import human_console, progress\n"
            "with progress(human_console()) as step:\n    step('deploying lab x')\n    step('flow f (1/1)')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].endswith("] deploying lab x") and lines[1].endswith("] flow f (1/1)")


def test_doctor_says_not_probed_rather_than_missing() -> None:
    from kpemu.kernel.probe import Capabilities, Feature, requirements
    from kpemu.runtimes.doctor import doctor_data

    caps = Capabilities(kernel="test", root=False)
    for name in requirements("calico-ipip", "ipvs"):
        caps.features[name] = Feature(name, False, "not probed", "needs root (network namespace)")
    caps.features["vxlan"] = Feature("vxlan", False, "ip link add type vxlan", "Operation not supported")
    data = doctor_data(caps)
    assert {f["status"] for n, f in data["features"].items() if n != "vxlan"} == {"not probed"}
    assert data["features"]["vxlan"]["status"] == "missing"
    run = data["runs"]["calico-ipip/ipvs"]
    assert run["runtime"] == "unknown" and run["missing"] == [] and "ip_vs" in run["not_probed"]
    assert "vxlan" in data["runs"]["flannel-vxlan/iptables"]["missing"]
