"""Whole-dump goldens per release and proxy mode (tests/data/golden, written by scripts/goldens.py):
every line of `kpemu rules --format all` for tests/data/rich.yaml on node2, for every modelled
release. A golden is stored for the first release and for each release whose dump changes, so
the releases between two goldens are asserted to produce exactly the earlier one's text.

The goldens are regression pins written by the code under test, not independent truth (that is
upstream's own text, in test_upstream_iptables.py and test_proxy_nftables.py): regenerate one only
for a change you mean, and review its diff like code."""

from __future__ import annotations

from itertools import pairwise

import pytest

from scripts.goldens import GOLDEN, MODES, RELEASES, dump
from tests.unit.upstream_iptables import check_iptables_rule_jumps


def _stored(mode: str) -> dict[int, str]:
    return {int(p.stem.split(".")[1]): p.read_text() for p in (GOLDEN / mode).glob("1.*.rules")}


@pytest.mark.parametrize(("mode", "minor"), [(mode, minor) for mode in MODES for minor in RELEASES[mode]])
def test_release_dump_equals_its_golden(mode: str, minor: int) -> None:
    stored = _stored(mode)
    golden = max(m for m in stored if m <= minor)
    assert dump(mode, minor) == stored[golden], f"1.{minor} {mode} differs from golden 1.{golden}"


@pytest.mark.parametrize("mode", MODES)
def test_every_golden_jump_lands_on_a_target_or_a_declared_chain(mode: str) -> None:
    """Upstream's checkIPTablesRuleJumps on each golden's iptables-restore and iptables-save text."""
    for minor, text in sorted(_stored(mode).items()):
        sections = text.split("# --- ")
        for section in (s for s in sections if s.startswith(("iptables-restore ---", "iptables-save ---"))):
            assert check_iptables_rule_jumps(section) == [], f"1.{minor} {mode} {section.split()[0]}"


@pytest.mark.parametrize("mode", MODES)
def test_each_golden_is_a_boundary(mode: str) -> None:
    stored = _stored(mode)
    assert min(stored) == RELEASES[mode][0]
    minors = sorted(stored)
    for before, after in pairwise(minors):
        assert stored[before] != stored[after], f"golden 1.{after} repeats 1.{before}"


def test_newest_release_boundaries_are_the_documented_ones() -> None:
    """1.34-1.37 change no iptables or IPVS text (proxy/versions.py); nfacct arrives in 1.30/1.31."""
    assert max(_stored("iptables")) == 31 and max(_stored("ipvs")) == 29
    assert "ct_state_invalid_dropped_pkts" in _stored("iptables")[30]
    assert "localhost_nps_accepted_pkts" not in _stored("iptables")[30]
    assert "-m nfacct --nfacct-name localhost_nps_accepted_pkts" in _stored("iptables")[31]


def test_nftables_boundaries_are_the_modelled_eras() -> None:
    """nftables goldens change where eras.py says the transaction changes: 1.30, 1.31, 1.33, 1.34,
    1.36 (the hairpin-connections rework, #135800/#136499) and 1.37 (one-endpoint `dnat to`, the
    localhost NodePort reject objects added and deleted)."""
    stored = _stored("nftables")
    assert sorted(stored) == [29, 30, 31, 33, 34, 36, 37]
    assert "mark-for-masquerade" in stored[34] and "mark-for-masquerade" not in stored[36]
    assert "add set ip kube-proxy hairpin-connections " in stored[36]
    assert " dnat ip addr . port to numgen random mod " in stored[36]
    assert "dnat ip addr . port to numgen random mod 1 " not in stored[37]
    dns = "add rule ip kube-proxy local-Z3XHB2ZZ-default/dns/udp/dns"
    assert f"{dns} meta l4proto udp dnat to 10.244.1.7:53\n" in stored[37]
    assert "delete counter ip kube-proxy localhost-nodeport-rejected-sctp\n" in stored[37]
