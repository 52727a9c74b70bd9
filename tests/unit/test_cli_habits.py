"""Habits from containerlab and kubectl: `-t/--topo` for the topology, `-o` as the output format."""

from __future__ import annotations

import json

import yaml

from tests.helpers import cli

TOPO = "topologies/seed-001.yaml"


def test_topology_as_argument_or_dash_t() -> None:
    by_arg = cli("rules", TOPO, "--node", "minikube", "--format", "iptables-save")
    by_t = cli("rules", "-t", TOPO, "--node", "minikube", "--format", "iptables-save")
    by_topo = cli("graph", "--topo", TOPO, "--format", "dot")
    assert by_arg.returncode == by_t.returncode == by_topo.returncode == 0
    assert by_t.stdout == by_arg.stdout and by_topo.stdout == cli("graph", TOPO, "--format", "dot").stdout


def test_topology_given_twice_or_not_at_all_is_refused() -> None:
    both = cli("rules", TOPO, "-t", TOPO, "--node", "minikube")
    assert (both.returncode, both.stderr.strip()) == (
        2, f"kpemu rules: give the topology once: {TOPO} as the argument or -t {TOPO}, not both")
    none = cli("check-node", "--node", "minikube", "--iptables-save", "tests/data/seed-001.iptables-save")
    assert (none.returncode, none.stderr.strip()) == (
        2, "kpemu check-node: which topology? give it as the first argument or with -t FILE")


def test_check_node_and_trace_print_yaml_as_they_print_json() -> None:
    args = ("check-node", "-t", "tests/data/k8s/seed-001.yaml", "--node", "minikube",
            "--iptables-save", "tests/data/seed-001.iptables-save")
    as_json, as_yaml = cli(*args, "-o", "json"), cli(*args, "-o", "yaml")
    assert as_json.returncode == as_yaml.returncode
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
    trace = ("trace", "--iptables-save", "tests/data/seed-001.iptables-save", "--node", "minikube",
             "--node-ip", "192.168.49.2", "--src", "10.242.72.50", "--dst", "192.168.49.2:30180")
    assert yaml.safe_load(cli(*trace, "-o", "yaml").stdout) == json.loads(cli(*trace, "-o", "json").stdout)


def test_standard_input_is_a_file_named_dash() -> None:
    from tests.helpers import ROOT, kpemu

    text = (ROOT / TOPO).read_text()
    v = kpemu("validate", "-", input=text, timeout=60)
    assert (v.returncode, v.stdout) == (0, "-: ok (topology)\n1 of 1 file(s) valid\n")
    r = kpemu("rules", "-t", "-", "--node", "minikube", "--format", "iptables-save", input=text, timeout=60)
    assert r.stdout == cli("rules", TOPO, "--node", "minikube", "--format", "iptables-save").stdout


def test_inspect_all_is_every_lab_and_not_one() -> None:
    r = cli("inspect", "flannel", "--all")
    assert (r.returncode, r.stderr.strip()) == (
        2, "kpemu inspect: --all shows every lab; give it without a lab name (flannel)")
    assert cli("inspect", "--all", "-o", "json").stdout == cli("inspect", "-o", "json").stdout


def _complete(line: str, tmp_path: object) -> list[str]:
    """What the shell would offer after `line` (argcomplete's protocol, as `kpemu completion bash` drives it)."""
    from pathlib import Path

    from tests.helpers import kpemu

    out = Path(str(tmp_path)) / "completions"
    env = {"COMP_LINE": line, "COMP_POINT": str(len(line)), "_ARGCOMPLETE": "1",
           "_ARGCOMPLETE_IFS": "\n", "_ARGCOMPLETE_STDOUT_FILENAME": str(out)}
    done = kpemu(env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return sorted(c.rstrip(" ") for c in out.read_text().split("\n") if c)  # a lone answer ends in a space


def test_completion_offers_examples_files_and_nodes(tmp_path: object) -> None:
    assert _complete("kpemu run example:nft-", tmp_path) == [
        "example:nft-137", "example:nft-clusterip-vxlan", "example:nft-hairpin", "example:nft-loadbalancer",
        "example:nft-nodeport"]
    assert _complete("kpemu rules -t topologies/flannel", tmp_path) == ["topologies/flannel-vxlan.yaml"]
    assert _complete("kpemu rules topologies/calico-ipip.yaml --node ", tmp_path) == ["node1", "node2"]
    assert _complete("kpemu trace -t nowhere.yaml --node ", tmp_path) == []


def test_examples_copy_lays_the_files_out_as_the_repository_does(tmp_path: object) -> None:
    from pathlib import Path

    dest = Path(str(tmp_path)) / "ex"
    r = cli("examples", "copy", str(dest))
    assert r.returncode == 0, r.stderr
    assert (dest / "scenarios" / "nodeport-iptables" / "golden").is_dir()
    v = cli("validate", str(dest / "scenarios" / "nodeport-iptables.yaml"),
              str(dest / "scenarios" / "faults" / "mtu-mismatch.yaml"))
    assert v.stdout.splitlines()[-1] == "2 of 2 file(s) valid", v.stderr
    again = cli("examples", "copy", str(dest))
    assert again.returncode == 2 and "exists; copy into a new or empty directory" in again.stderr
    assert "example:faults/mtu-mismatch" in cli("examples").stdout
