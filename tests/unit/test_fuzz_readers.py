"""The offline readers are total: thousands of mutated real dumps and Kubernetes objects (fixed seed,
tests/unit/fuzz_readers.py) through `trace --iptables-save/--nft/--ipvs/--ipset`, `check-node` and
`import`, and each one answers 0, 1 or 2 without a traceback, a refusal naming the file. Then a table
of the hostile inputs the issue names, each refused with exit 2 naming the file, the line and what
was wrong. How long the slowest case takes is measured by `scripts/bench.py readers`, not asserted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import kpemu
from tests.unit.fuzz_readers import DATA, TARGETS, Target, case_path, cases, run_case, violation

PER_TARGET = int(os.environ.get("KPEMU_FUZZ_CASES", "200"))  # per target; 14 targets: 2,800 cases (more for a soak)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_mutated_inputs_never_give_a_traceback(target: Target, tmp_path: Path) -> None:
    broken = []
    ran = 0
    for what, data in cases(target, PER_TARGET):
        ran += 1
        wrong = violation(run_case(target, what, data, tmp_path), str(case_path(target, tmp_path)))
        if wrong:
            broken.append(f"{what}: {wrong}")
    assert ran == PER_TARGET
    assert not broken, f"{len(broken)} of {ran} cases broke the readers' contract:\n" + "\n".join(broken[:10])


@dataclass(frozen=True)
class Hostile:
    """One input the issue names: the target reading it, how the seed is changed, what exit 2 must say."""

    name: str
    target: str
    change: Callable[[str], str | bytes]
    expected: tuple[str, ...]


def _target(name: str) -> Target:
    return next(t for t in TARGETS if t.name == name)


def _sub(old: str, new: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return change


_IPT_DECLARED = """*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-SERVICEZ -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j ACCEPT
COMMIT
"""
HOSTILE = (
    Hostile("anonymised address", "trace-iptables", _sub("-s 172.17.0.5/32", "-s x.x.x.x/32"),
            ("line 12", "-s: 'x.x.x.x/32' is not an IPv4 address or network")),
    Hostile("prefix out of range", "trace-iptables", _sub("-s 172.17.0.5/32", "-s 172.17.0.5/42"),
            ("line 12", "is not an IPv4 address or network")),
    Hostile("probability inf", "trace-iptables", _sub("--probability 0.50000000000", "--probability inf"),
            ("--probability: 'inf' is out of range: a probability is 0-1",)),
    Hostile("5,000 digits", "trace-iptables", _sub("--dport 30180", "--dport " + "9" * 5000),
            ("--dport:", "a number of 5000 characters")),
    Hostile("mark of 33 bits", "check-node-iptables", _sub("0x4000/0x4000", "0x1ffffffff/0x4000"),
            ("--set-xmark: '0x1ffffffff' is out of range",)),
    Hostile("a comment option cut short", "trace-iptables",
            _sub('-m comment --comment "kubernetes service portals" -j KUBE-SERVICES', "-m comment --co"),
            ("-m comment: --co is not an option iptables-save prints for it (it prints --comment)",)),
    Hostile("DNAT without its destination", "trace-iptables",
            _sub("-j DNAT --to-destination 172.17.0.5:80", "-j DNAT --to-destination"),
            ("line 13: DNAT without --to-destination: the rule is cut short",)),
    Hostile("an option cut short", "trace-iptables", _sub("-j KUBE-FORWARD\n", "-j\n"),
            ("rule is cut short (an option without its value)",)),
    Hostile("MARK without its option", "trace-iptables", _sub("-j MARK --set-xmark 0x4000/0x4000", "-j MARK"),
            ("line 8", "-j MARK takes one of")),
    Hostile("MARK with an unknown option", "trace-iptables", _sub("--set-xmark 0x4000/0x4000", "--bogus 0x4000"),
            ("line 8", "-j MARK: unknown option --bogus")),
    Hostile("-I past the chain's end", "trace-iptables", _sub("-A KUBE-MARK-DROP -j", "-I KUBE-MARK-DROP 9 -j"),
            ("line 7", "index of insertion too big")),
    Hostile("a jump loop", "trace-iptables", _sub("COMMIT", "-A KUBE-SERVICES -j KUBE-NODEPORTS\n"
                                                            "-A KUBE-NODEPORTS -j KUBE-SERVICES\nCOMMIT"),
            ("jump loop KUBE-", "ELOOP")),
    Hostile("a rule in an undeclared chain", "trace-iptables", lambda _: _IPT_DECLARED,
            ("line 8", "-A KUBE-SERVICEZ: no chain KUBE-SERVICEZ declared in table *filter")),
    Hostile("not UTF-8", "trace-nft", lambda text: text.encode().replace(b"kube-proxy {", b"kube-proxy \xff{", 1),
            ("is not UTF-8", "column")),
    Hostile("numgen mod 0", "trace-nft", _sub("numgen random mod 1 vmap", "numgen random mod 0 vmap"),
            ("numgen's modulus", "out of range")),
    Hostile("nft set timeout of 5,000 digits", "trace-nft",
            _sub("\t\ttimeout 3h\n", "\t\ttimeout " + "9" * 5000 + "h\n"),
            ("timeout of set affinity-", "a number of 5000 characters")),
    Hostile("nft set timeout not a duration", "trace-nft", _sub("\t\ttimeout 3h\n", "\t\ttimeout 3x\n"),
            ("timeout of set affinity-", "'3x' is not a duration")),
    Hostile("nft anonymised address", "trace-nft", _sub("dnat to 10.244.1.6:9000", "dnat to x.x.x.x:9000"),
            ("'x.x.x.x' is not an IPv4 address",)),
    Hostile("nft port out of range", "check-node-nft", _sub("10.96.0.10 . tcp . 80 :", "10.96.0.10 . tcp . 65536 :"),
            ("map service-ips", "'65536' is out of range")),
    Hostile("nft jump loop", "trace-nft", _sub("meta l4proto tcp dnat to 10.244.1.6:9000",
                                               "meta l4proto tcp dnat to 10.244.1.6:9000\n\t\tjump services"),
            ("jump loop", "ELOOP")),
    Hostile("ipvs anonymised address", "trace-ipvs", _sub("-r 192.168.97.10:80", "-r x.x.x.x:80"),
            ("line 2", "-r: 'x.x.x.x' is not an IPv4 address")),
    Hostile("ipset member out of range", "trace-ipset", _sub("tcp:53,", "tcp:99999,"),
            ("line 2", "'99999' is out of range")),
    Hostile("a Service's ports of the wrong shape", "import",
            _sub("  ports:\n  - name: grpc\n", "  ports: 7\n  x:\n  - name: grpc\n"),
            ("spec.ports", "Invalid value: 7: must be a list")),
)


@pytest.mark.parametrize("case", HOSTILE, ids=lambda c: c.name)
def test_hostile_dump_is_refused_naming_file_line_and_field(case: Hostile, tmp_path: Path) -> None:
    target = _target(case.target)
    changed = case.change(target.seed.read_text())
    r = run_case(target, case.name, changed if isinstance(changed, bytes) else changed.encode(), tmp_path)
    assert r.traceback is None, r.traceback
    assert r.code == 2, r.stderr
    assert str(case_path(target, tmp_path)) in r.stderr
    for fragment in case.expected:
        assert fragment in r.stderr, r.stderr


def test_the_cli_refuses_a_hostile_dump_without_a_traceback(tmp_path: Path) -> None:
    """One case through a real `python -m kpemu.cli` process: exit 2, one line on stderr."""
    bad = tmp_path / "node.iptables-save"
    bad.write_bytes((DATA / "seed-001.iptables-save").read_bytes().replace(b"172.17.0.5/32", b"x.x.x.x/32", 1))
    res = kpemu("trace", "--iptables-save", str(bad), "--node", "n", "--node-ip", "192.168.49.2",
                "--src", "10.242.72.50", "--dst", "192.168.49.2:30180", timeout=60)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert res.stderr.startswith(f"{bad}: line 12: ")
