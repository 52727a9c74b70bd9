"""Seed 000 (IPVS mode, calico IPIP, kube-proxy 1.20): topologies/calico-ipip.yaml, node1.

The seed's facts (its ipset listings, rule lines and IPVS lines) are kept verbatim in
tests/data/seed-000.facts (typographic quotes and trailing annotations included); the lists below
are read from there.
"""

from __future__ import annotations

import re

import pytest

from kpemu.inputs.topology import load_topology
from kpemu.proxy.ipvs import ipvs_rules
from kpemu.proxy.save import rule_lines, ruleset_from_restore, save_text
from tests.helpers import ROOT

FACTS = (ROOT / "tests" / "data" / "seed-000.facts").read_text().splitlines()


def _members(name: str) -> list[str]:
    """The members listed under `Name: <name>` ... `Members:`."""
    i = FACTS.index(f"Name: {name}")
    i = FACTS.index("Members:", i) + 1
    out = []
    while i < len(FACTS) and re.match(r"^\d+\.\d+\.\d+\.\d+,", FACTS[i]):
        out.append(FACTS[i])
        i += 1
    return out


def _rule(line: str) -> str:
    """A rule line without the note's indentation, leading `//` and trailing `//` / `#` annotations."""
    line = line.strip().removeprefix("// ")
    return re.split(r" ?//| # ", line, maxsplit=1)[0].rstrip()


SEED_CLUSTER_IP = _members("KUBE-CLUSTER-IP")
SEED_LOOP_BACK = _members("KUBE-LOOP-BACK")
SEED_RULES = [_rule(ln) for ln in FACTS if "-A " in ln]
SEED_IPVS = [ln for ln in FACTS if ln.startswith(("TCP ", "-> "))]


def normalise(line: str) -> str:
    """The seed was pasted through a word processor: “ ” are plain double quotes."""
    return line.replace("“", '"').replace("”", '"')


@pytest.fixture(scope="module")
def state():  # type: ignore[no-untyped-def]
    return ipvs_rules(load_topology(ROOT / "topologies" / "calico-ipip.yaml"), "node1")


def test_facts_hold_what_the_tests_use() -> None:
    assert len(SEED_CLUSTER_IP) == 7 and len(SEED_LOOP_BACK) == 3 and len(SEED_RULES) == 11
    assert SEED_RULES[4] == "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"
    assert SEED_IPVS == ["TCP 10.246.198.17:30080 rr", "-> 192.168.97.10:80 Masq 1 0 0"]


def test_cluster_ip_set_is_exactly_the_seeds(state) -> None:  # type: ignore[no-untyped-def]
    assert set(state.ipset("KUBE-CLUSTER-IP").members) == set(SEED_CLUSTER_IP)
    assert len(state.ipset("KUBE-CLUSTER-IP").members) == 7


def test_loop_back_set_contains_the_seeds(state) -> None:  # type: ignore[no-untyped-def]
    members = set(state.ipset("KUBE-LOOP-BACK").members)
    assert set(SEED_LOOP_BACK) <= members
    # nginx-0 (192.168.97.10) also runs on node1, so kube-proxy adds it too; the seed's listing
    # shows the set without it (taken before nginx was scheduled, or trimmed by the author).
    assert members - set(SEED_LOOP_BACK) == {"192.168.97.10,tcp:80,192.168.97.10"}


def test_saved_rules_contain_the_seeds_lines_in_order(state) -> None:  # type: ignore[no-untyped-def]
    saved = save_text(ruleset_from_restore(state.restore_text()))
    chains = rule_lines(saved)
    lines = saved.splitlines()
    for rule in map(normalise, SEED_RULES):
        assert rule in lines, rule
    # Order inside the chains, as the seed walks them.
    assert chains["nat/KUBE-SERVICES"] == [normalise(SEED_RULES[i]) for i in (1, 2, 5)]
    assert chains["nat/KUBE-POSTROUTING"] == [normalise(r) for r in SEED_RULES[7:]]
    assert chains["nat/KUBE-NODE-PORT"] == [SEED_RULES[3]]


def test_nodeport_virtual_server_of_the_seed(state) -> None:  # type: ignore[no-untyped-def]
    # Seed: SEED_IPVS ("TCP 10.246.198.17:30080 rr", "-> 192.168.97.10:80 Masq 1 0 0")
    text = state.ipvsadm_text()
    assert "-A -t 10.246.198.17:30080 -s rr\n-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1\n" in text
    assert "192.168.96.165" in state.bound_addresses
