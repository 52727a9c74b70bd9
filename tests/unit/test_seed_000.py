"""Seed 000 (IPVS mode, calico IPIP, kube-proxy 1.20): topologies/calico-ipip.yaml, node1.

The seed's lines are copied below verbatim (typographic quotes included); when shared/seeds is
beside the repository the test also checks they really are in the seed file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kpemu.model import load_topology
from kpemu.proxy.ipvs import ipvs_rules
from kpemu.proxy.save import rule_lines, ruleset_from_restore, save_text

REPO = Path(__file__).resolve().parents[2]
SEED = REPO.parent / "shared" / "seeds" / "000_cd705ed516f9863f.txt"

SEED_CLUSTER_IP = [
    "192.168.96.3,tcp:9153",
    "192.168.96.1,tcp:443",
    "192.168.96.165,tcp:80",
    "192.168.96.3,tcp:53",
    "192.168.96.69,tcp:80",
    "192.168.96.3,udp:53",
    "192.168.96.126,tcp:80",
]
SEED_LOOP_BACK = [
    "192.168.97.5,tcp:9153,192.168.97.5",
    "192.168.97.5,udp:53,192.168.97.5",
    "192.168.97.5,tcp:53,192.168.97.5",
]
# The seed's rule lines, with its trailing "//" and "#" annotations removed.
SEED_RULES = [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A KUBE-SERVICES ! -s 192.168.97.0/24 -m comment --comment "Kubernetes service cluster ip + port for '
    'masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ',
    "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT",
    '-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set '
    "--match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ",
    "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
    "-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT",
    "-A POSTROUTING -m comment --comment “kubernetes postrouting rules” -j KUBE-POSTROUTING",
    "-A KUBE-POSTROUTING -m comment --comment “Kubernetes endpoints dst ip:port, source ip for solving hairpin "
    "purpose” -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0",
    "-A KUBE-POSTROUTING -m comment --comment “kubernetes service traffic requiring SNAT” -j MASQUERADE "
    "--random-fully",
]


def normalise(line: str) -> str:
    """The seed was pasted through a word processor: “ ” are plain double quotes."""
    return line.replace("“", '"').replace("”", '"')


@pytest.fixture(scope="module")
def state():  # type: ignore[no-untyped-def]
    return ipvs_rules(load_topology(REPO / "topologies" / "calico-ipip.yaml"), "node1")


@pytest.mark.skipif(not SEED.exists(), reason="shared/seeds is not beside the repository")
def test_quoted_lines_are_the_seeds() -> None:
    text = SEED.read_text()
    for member in SEED_CLUSTER_IP + SEED_LOOP_BACK:
        assert f"\n{member}\n" in text
    for rule in SEED_RULES:
        assert rule in text


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
    # Seed: "TCP 10.246.198.17:30080 rr -> 192.168.97.10:80 Masq 1 0 0"
    text = state.ipvsadm_text()
    assert "-A -t 10.246.198.17:30080 -s rr\n-a -t 10.246.198.17:30080 -r 192.168.97.10:80 -m -w 1\n" in text
    assert "192.168.96.165" in state.bound_addresses
