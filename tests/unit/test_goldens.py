"""Whole-dump goldens per release and proxy mode (tests/data/golden, written by scripts/goldens.py):
every line of `kpemu rules --format all` for tests/data/rich.yaml on node2, for every modelled
release. A golden is stored for the first release and for each release whose dump changes, so
the releases between two goldens are asserted to produce exactly the earlier one's text."""

from __future__ import annotations

from itertools import pairwise

import pytest

from kpemu.model.topology import NEWEST_MINOR, OLDEST_MINOR
from scripts.goldens import GOLDEN, MODES, dump

RELEASES = range(OLDEST_MINOR, NEWEST_MINOR + 1)


def _stored(mode: str) -> dict[int, str]:
    return {int(p.stem.split(".")[1]): p.read_text() for p in (GOLDEN / mode).glob("1.*.rules")}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("minor", RELEASES)
def test_release_dump_equals_its_golden(mode: str, minor: int) -> None:
    stored = _stored(mode)
    golden = max(m for m in stored if m <= minor)
    assert dump(mode, minor) == stored[golden], f"1.{minor} {mode} differs from golden 1.{golden}"


@pytest.mark.parametrize("mode", MODES)
def test_each_golden_is_a_boundary(mode: str) -> None:
    stored = _stored(mode)
    assert min(stored) == OLDEST_MINOR
    minors = sorted(stored)
    for before, after in pairwise(minors):
        assert stored[before] != stored[after], f"golden 1.{after} repeats 1.{before}"


def test_newest_release_boundaries_are_the_documented_ones() -> None:
    """1.34-1.37 change no iptables or IPVS text (proxy/versions.py); nfacct arrives in 1.30/1.31."""
    assert max(_stored("iptables")) == 31 and max(_stored("ipvs")) == 29
    assert "ct_state_invalid_dropped_pkts" in _stored("iptables")[30]
    assert "localhost_nps_accepted_pkts" not in _stored("iptables")[30]
    assert "-m nfacct --nfacct-name localhost_nps_accepted_pkts" in _stored("iptables")[31]
