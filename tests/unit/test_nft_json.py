"""`nft -j list ruleset` (libnftables JSON) read into the model the text reader gives for the same
kernel's `nft list ruleset` (both printed by nft 1.0.6 from one namespace, beside docker's tables),
its problems naming the JSON element, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from kpemu.dumps.nft.read import parse_nft
from kpemu.errors import InputError
from tests.helpers import ROOT

DUMP = ROOT / "tests" / "data" / "nft-dump"


def test_json_gives_the_text_model_but_the_comments_json_does_not_print() -> None:
    text = parse_nft((DUMP / "beside-docker.nft").read_text(), "t")
    got = parse_nft((DUMP / "beside-docker.json").read_text(), "j")
    assert got.form == "nft -j list ruleset"
    assert [t.name for t in got.beside] == [t.name for t in text.beside] == [
        "inet filter", "ip flannel-ipv4", "ip filter", "ip nat"]
    assert got.before == text.before == 2 and got.others == text.others == []
    # JSON keeps the other tables' base chains (hook, priority, policy), not their rules: each is undecided in a walk
    assert [t.policies for t in got.beside] == [t.policies for t in text.beside]
    assert not any(t.unread for t in text.beside) and all(t.unread for t in got.beside)
    assert [c.hook for t in got.beside for c in t.table.chains.values()] == [
        c.hook for t in text.beside for c in t.table.chains.values() if c.hook]
    assert got.policies == text.policies
    assert text.table is not None and got.table is not None
    bare = {n: replace(c, comment=None) for n, c in text.table.chains.items()}
    assert replace(text.table, comment=None, chains=bare) == got.table
    assert got.describe() == ("j (nft -j list ruleset; beside it: table inet filter (rules not read), table ip "
                              "flannel-ipv4 (rules not read), table ip filter (rules not read), table ip nat "
                              "(rules not read))")


def _trace(dump: str) -> dict:
    res = subprocess.run([sys.executable, "-m", "kpemu.cli", "trace", "--nft", str(DUMP / dump), "--node", "node1",
                          "--node-ip", "192.168.1.100", "--src", "10.242.72.50", "--dst", "192.168.1.100:30080",
                          "--iif", "eth0", "--oif", "flannel.1", "-o", "json"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _kube_proxy_steps(outcome: dict) -> list[dict]:
    return [s for s in outcome["path"] if " " not in s["baseChain"]]  # another table's base chain: `family name chain`


def test_trace_of_json_and_text_walk_kube_proxys_table_alike() -> None:
    """Where the JSON walk's other tables (rules not read) let the packet on, kube-proxy's steps are the text
    walk's, which docker's FORWARD policy drop ends at the forward hook (docker's chain, made later, runs before
    kube-proxy's of the same priority); past it, kube-proxy's forward and postrouting chains."""
    text, got = _trace("beside-docker.nft"), _trace("beside-docker.json")
    assert "nft -j list ruleset" in got["rules"] and "nft -j list ruleset" not in text["rules"]
    assert [o["verdict"] for o in text["outcomes"]] == ["DROP", "DROP"]
    kube = {o["dnat"]: _kube_proxy_steps(o) for o in text["outcomes"]}
    passed = [o for o in got["outcomes"] if all(a["holds"] for a in o["assumed"])]
    assert len(passed) == 2 and {o["verdict"] for o in passed} == {"ACCEPT"}
    for o in passed:
        steps = _kube_proxy_steps(o)
        assert steps[:len(kube[o["dnat"]])] == kube[o["dnat"]]
        assert [s["chain"] for s in steps[len(kube[o["dnat"]]):]] == [
            "filter-forward", "filter-forward", "nat-postrouting", "masquerading", "masquerading"]


def _error(doc: object) -> str:
    with pytest.raises(InputError) as e:
        parse_nft(json.dumps(doc), "n.json")
    return str(e.value)


def test_json_problems_name_the_element() -> None:
    doc = json.loads((DUMP / "beside-docker.json").read_text())
    items = doc["nftables"]
    i = next(k for k, x in enumerate(items) if "rule" in x and x["rule"]["table"] == "kube-proxy")
    chain = items[i]["rule"]["chain"]
    items[i]["rule"]["expr"] = [{"jump": {"target": "nowhere"}}]
    assert _error(doc).startswith(f"n.json: nftables[{i}] (rule of chain {chain}): jump nowhere: no chain nowhere")
    items[i]["rule"]["expr"] = [{"xt": {"type": "match", "name": "conntrack"}}]
    assert _error(doc).startswith(f"n.json: nftables[{i}] (rule of chain {chain}): statement 'xt': kpemu reads")
    del items[i]["rule"]["expr"]
    assert _error(doc) == (f"n.json: nftables[{i}] (rule of chain {chain}): the element has no 'expr'; save the "
                           "output of nft -j list ruleset again, unedited")
    assert _error({"nft": []}) == ('n.json: not libnftables JSON: expected {"nftables": [...]} (nft -j list '
                                   'ruleset)')
    with pytest.raises(InputError) as e:
        parse_nft('{"nftables": [', "n.json")
    assert str(e.value).startswith("n.json: line 1: column 15: not JSON")


def test_check_node_on_json_compares_without_the_comments_json_does_not_carry_and_says_so() -> None:
    from tests.helpers import cli

    res = cli("check-node", "tests/data/nft-dump/cluster.yaml", "--node", "node1", "--nft",
              "tests/data/nft-dump/beside-docker.json")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1:] == [
        "note: nft -j list ruleset does not carry the table's and chains' comments (libnftables' JSON leaves them "
        "out): compared without them; `nft list ruleset` shows them",
        "no drift: the 72 kube-proxy rules and set/map elements equal what kube-proxy would program"]
    text = cli("check-node", "tests/data/nft-dump/cluster.yaml", "--node", "node1", "--nft",
               "tests/data/nft-dump/beside-docker.nft")
    assert "note:" not in text.stdout


def test_check_node_on_json_still_reports_a_changed_chain_other_than_its_comment(tmp_path) -> None:
    from tests.helpers import cli

    doc = json.loads((DUMP / "beside-docker.json").read_text())
    chain = next(x["chain"] for x in doc["nftables"] if "chain" in x and x["chain"]["table"] == "kube-proxy"
                 and "hook" in x["chain"])
    chain["prio"] = chain["prio"] + 1
    dump = tmp_path / "n.json"
    dump.write_text(json.dumps(doc))
    res = cli("check-node", "tests/data/nft-dump/cluster.yaml", "--node", "node1", "--nft", str(dump), "-o", "json")
    out = json.loads(res.stdout)
    assert out["equal"] is False and out["notes"]
    (group,) = out["groups"]
    ((exp, got),) = [(c["kubeProxy"], c["dump"]) for c in group["changed"]]
    assert "comment" not in exp[0] and exp[0].split("priority")[0] == got[0].split("priority")[0] != exp[0]
