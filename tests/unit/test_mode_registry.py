"""The proxy-mode registry: one entry per mode, each from its package, agreeing with the model's facts."""

from __future__ import annotations

import re

from kpemu.model.modes import MODE_FACTS
from kpemu.model.topology import KubeProxy
from kpemu.proxy import iptables, ipvs, nftables
from kpemu.proxy.modes import ALL_FORMATS, MODES
from tests.helpers import ROOT


def test_the_registry_the_facts_and_the_schema_name_the_same_modes_in_the_same_order() -> None:
    schema = KubeProxy.model_json_schema()["properties"]["mode"]["enum"]
    assert list(MODES) == list(MODE_FACTS) == list(schema) == ["iptables", "ipvs", "nftables"]
    assert [MODES[n].facts for n in MODES] == [MODE_FACTS[n] for n in MODE_FACTS]


def test_each_entry_is_its_package_s_own() -> None:
    assert (MODES["iptables"], MODES["ipvs"], MODES["nftables"]) == (iptables.MODE, ipvs.MODE, nftables.MODE)


def test_capabilities_asked_of_the_registry() -> None:
    assert [n for n, m in MODES.items() if "ipvs" in m.saved] == ["ipvs"]
    assert [(n, m.trace, m.walks) for n, m in MODES.items()] == [
        ("iptables", "iptables-trace", "xtables"), ("ipvs", "iptables-trace", "xtables"),
        ("nftables", "nft-monitor", "nft")]
    assert [n for n, m in MODES.items() if m.nfacct] == ["iptables"]
    assert [n for n, m in MODE_FACTS.items() if m.scheduler] == ["ipvs"]
    assert [(n, m.accepts(10), m.accepts(11), m.accepts(29)) for n, m in MODES.items()] == [
        ("iptables", True, True, True), ("ipvs", False, True, True), ("nftables", False, False, True)]
    old, deprecated = KubeProxy(mode="ipvs", version="1.34"), KubeProxy(mode="ipvs", version="1.35")
    assert (MODES["ipvs"].notice(old), MODES["iptables"].notice(deprecated)) == (None, None)
    assert MODES["ipvs"].notice(deprecated).startswith("The ipvs proxier is now deprecated")


def test_every_format_belongs_to_a_mode_in_print_order() -> None:
    assert ALL_FORMATS == ("iptables-restore", "iptables-save", "ipset", "ipvs", "nft", "nft-list")


def test_no_module_outside_the_mode_packages_compares_a_mode_name() -> None:
    """Behaviour that depends on the mode asks its registry entry (saved, trace, walks, nfacct, notice,
    build, facts) or the tables keyed by it, so no `mode == "ipvs"` test lives outside kpemu/proxy/<mode>/."""
    kpemu = ROOT / "kpemu"
    compare = re.compile(r"\bmode\s*(==|!=|not in [(\[])|(==|!=)\s*[\w.]*\bmode\b(?!\.)|\bwalks\s*(==|!=)")
    packages = [kpemu / "proxy" / name for name in MODES]
    found = [f"{p.relative_to(kpemu.parent)}: {m.group(0)}" for p in kpemu.rglob("*.py")
             if not any(d in p.parents for d in packages) for m in compare.finditer(p.read_text())]
    assert found == []
