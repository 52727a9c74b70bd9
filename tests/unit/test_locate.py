"""Every topology and scenario problem names its line and column (kpemu.inputs.locate), and a
misspelt key the key it most likely meant (kpemu.model.parse)."""

from __future__ import annotations

from pathlib import Path

from kpemu.errors import Problem
from kpemu.inputs.locate import locate
from tests.helpers import cli

TOPOLOGY = """\
name: lines
cni: flannel-vxlan
kubeProxi:
  mode: iptables
nodes:
  - name: node1
    ip: 192.168.1.10
    podCIRD: 10.244.0.0/24
"""


def test_validate_names_line_column_and_the_key_meant(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(TOPOLOGY)
    r = cli("validate", str(f))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"{f}:6:5: nodes[0].podCIDR: required field is missing",
        f"{f}:8:5: nodes[0].podCIRD: unknown field; did you mean 'podCIDR'?",
        f"{f}:3:1: kubeProxi: unknown field; did you mean 'kubeProxy'?",
    ]


def test_a_scenario_field_is_found_in_the_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(TOPOLOGY.replace("kubeProxi", "kubeProxy").replace("podCIRD", "podCIDR"))
    s = tmp_path / "s.yaml"
    s.write_text("name: s\ntopology: t.yaml\nflows:\n  - name: f\n    from: node1\n    to: {pod: nowhere}\n"
                 "    conections: 3\n")
    err = cli("validate", str(s)).stderr
    assert f"{s}:7:5: flows[0].conections: unknown field; did you mean 'connections'?" in err.splitlines()


def test_what_is_no_field_path_or_no_file_keeps_no_place(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(TOPOLOGY)
    kept = [Problem(str(f), "line 16: services[1] (Service default/web) spec.ports", "Required value"),
            Problem(str(tmp_path / "gone.yaml"), "nodes[0]", "x"), Problem(str(f), "", "y")]
    assert locate(kept) == kept
    [deep] = locate([Problem(str(f), "nodes[0].ip.nothing[3]", "z")])
    assert (deep.line, deep.column) == (7, 5)  # the deepest part the file has: the key ip
