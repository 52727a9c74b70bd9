"""The iptables forms people paste: `iptables-save -c` counter lines, `iptables [-t nat] -S` (its
table told by the -P policies, --table or the chain names, and said), a grep'ped fragment walked as far
as it goes (a chain it jumps to but lacks makes that outcome undecided at the jump), and each
unreadable line refused naming the file, the line and the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kpemu.dumps.xtables.forms import FRAGMENT, LIST, SAVE, SAVE_COUNTERS, read_iptables
from kpemu.errors import InputError
from kpemu.proxy.save import canonical_line
from tests.helpers import ROOT

PASTED = ROOT / "tests" / "data" / "pasted"
SEED = ROOT / "tests" / "data" / "seed-001.iptables-save"


def _lines(rs) -> dict[str, list[str]]:
    return {t: [canonical_line(r) for c in tab.chains.values() for r in c.rules] for t, tab in rs.tables.items()}


def _error(text: str, table: str | None = None) -> str:
    with pytest.raises(InputError) as e:
        read_iptables(text, "node.txt", table)
    return str(e.value)


def test_counter_lines_are_the_same_rules_as_without_counters() -> None:
    text = (PASTED / "kubeadm-1461.iptables-save-c").read_text()
    counted = read_iptables(text, "f")
    plain = read_iptables("\n".join(line.split("] ", 1)[1] if line.startswith("[") else line
                                    for line in text.splitlines()), "f")
    assert (counted.form, plain.form) == (SAVE_COUNTERS, SAVE)
    assert _lines(counted.rules) == _lines(plain.rules)
    assert _lines(counted.rules)["nat"][1] == "-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER"


def test_a_counter_that_is_not_one_names_the_line() -> None:
    msg = _error("*nat\n:PREROUTING ACCEPT [0:0]\n[x:0] -A PREROUTING -j ACCEPT\nCOMMIT\n")
    assert msg == ("node.txt: line 3: not a counted rule: '[x:0] -A PREROUTING -j ACCEPT'; iptables-save -c prints "
                   "'[packets:bytes] -A CHAIN ...'")


_NAT_S = """-P PREROUTING ACCEPT
-P INPUT ACCEPT
-P OUTPUT ACCEPT
-P POSTROUTING ACCEPT
-N KUBE-MARK-MASQ
-N KUBE-SERVICES
-N KUBE-SVC-X
-N KUBE-SEP-A
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 53 -j KUBE-SVC-X
-A KUBE-SVC-X -j KUBE-SEP-A
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.0.2:53
"""
_FILTER_S = """-P INPUT ACCEPT
-P FORWARD DROP
-P OUTPUT ACCEPT
-N KUBE-FORWARD
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
"""


def test_iptables_t_nat_S_is_read_as_table_nat_by_its_policies() -> None:
    dump = read_iptables(_NAT_S, "nat.txt")
    assert dump.form == LIST
    assert dump.tables == {"nat": "its -P policies (line 1)"}
    assert dump.describe("nat.txt") == "nat.txt (iptables -S; table nat: its -P policies (line 1))"
    assert _lines(dump.rules)["nat"][-1] == "-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.0.2:53"


def test_two_S_outputs_one_after_the_other_are_two_tables_and_a_policy_is_kept() -> None:
    dump = read_iptables(_FILTER_S + _NAT_S + "-A KUBE-SEP-A -s 10.244.0.2/32 -j KUBE-MARK-MASQ -c 3 180\n", "f")
    assert list(dump.rules.tables) == ["filter", "nat"]
    assert dump.tables == {"filter": "its -P policies (line 1)", "nat": "its -P policies (line 7)"}
    assert _lines(dump.rules)["nat"][-1] == "-A KUBE-SEP-A -s 10.244.0.2/32 -j KUBE-MARK-MASQ"


def test_S_faults_name_the_line() -> None:
    assert _error("-A FOO -j ACCEPT\n-P INPUT ACCEPT\n") == (
        "node.txt: line 1: '-A FOO -j ACCEPT' before the first -P line; iptables -S prints the built-in chains' "
        "policies (-P) first")
    assert _error("-P INPUT ACCEPT\n-P PREROUTING ACCEPT\n") == (
        "node.txt: line 1: -P lines for INPUT, PREROUTING: no table has exactly these built-in chains (the output is "
        "cut or edited); give --table")
    assert _error(_NAT_S.replace("-N KUBE-SVC-X\n", "")) == (
        "node.txt: line 10: -j KUBE-SVC-X: no chain KUBE-SVC-X declared in table *nat and no such target "
        "(iptables-restore refuses the rule; the dump is cut short or edited)")
    assert _error(_NAT_S, "filter").startswith("node.txt: line 1: chain PREROUTING: policy")


def test_table_flag_names_the_table_and_is_refused_where_the_dump_names_it() -> None:
    dump = read_iptables("-A MY-CHAIN -j MY-OTHER\n", "f", "mangle")
    assert dump.tables == {"mangle": "given by --table"}
    assert _error(SEED.read_text(), "nat") == ("node.txt: line 3: --table is for iptables -S output and fragments; "
                                               "this dump names its tables (*table lines): leave --table out")
    assert _error("-A X -j Y\n", "natt") == ("node.txt: --table: 'natt' is not a table; expected one of raw, mangle, "
                                             "nat, filter, security")


def test_a_fragment_is_placed_by_its_chain_names_and_says_what_it_lacks() -> None:
    dump = read_iptables((PASTED / "debug-service.fragment").read_text(), "frag")
    assert dump.form == FRAGMENT
    assert dump.missing == {("nat", "KUBE-SEP-X3P2623AGDH6CDF3"): 10}
    assert dump.describe("frag") == (
        "frag (a fragment; table nat: line 4: chain KUBE-SEP-57KPRZ3JQVENLNBR is only in that table; what it leaves "
        "out can change the outcome; chains jumped to but absent: nat/KUBE-SEP-X3P2623AGDH6CDF3 (line 10); assumed "
        "as kube-proxy writes them: -A PREROUTING -j KUBE-SERVICES (nat), -A OUTPUT -j KUBE-SERVICES (nat))")


def test_a_fragment_of_two_tables_puts_each_rule_in_its_own() -> None:
    text = ("-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 53 -j KUBE-SVC-ERIFXISQEP7F7OF4\n"
            "-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable\n"
            "-A KUBE-SVC-ERIFXISQEP7F7OF4 -j KUBE-SEP-IT2ZTR26TO4XFPTO\n")
    dump = read_iptables(text, "f")
    assert {t: [line.split(" -j ")[1] for line in lines] for t, lines in _lines(dump.rules).items()
            if t in ("nat", "filter")} == {
        "nat": ["KUBE-SVC-ERIFXISQEP7F7OF4", "KUBE-SEP-IT2ZTR26TO4XFPTO", "ACCEPT", "KUBE-SERVICES", "KUBE-SERVICES"],
        "filter": ["REJECT --reject-with icmp-port-unreachable"]}


def test_a_fragment_no_name_places_is_refused_asking_for_the_table() -> None:
    assert _error("-A MY-CHAIN -j MY-OTHER\n") == (
        "node.txt: line 1: -A MY-CHAIN: cannot tell which table this rule is in (no *table line, no -P policies, no "
        "chain or target only one table has); give --table nat (or filter, mangle, raw), or paste the dump with its "
        "*table lines")
    assert _error("hello\n") == (
        "node.txt: line 1: not an iptables rule: 'hello'; expected iptables-save output (*table, :CHAIN, -A, COMMIT), "
        "iptables -S output (-P, -N, -A) or -A lines of either")


def _trace(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kpemu.cli", "trace", "--node", "n", "--node-ip", "192.168.1.5",
                           *argv], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_trace_of_a_fragment_is_undecided_at_the_jump_to_a_chain_it_lacks() -> None:
    res = _trace("--iptables-save", str(PASTED / "debug-service.fragment"), "--src", "10.244.0.9",
                 "--dst", "10.0.1.175:80", "-o", "json")
    assert res.returncode == 0, res.stderr
    outcomes = json.loads(res.stdout)["outcomes"]
    assert [(round(o["probability"], 4), o["verdict"], o["dnat"]) for o in outcomes] == [
        (0.3333, "ACCEPT", "10.244.3.6:9376"), (0.3333, "UNDECIDED", None), (0.3333, "ACCEPT", "10.244.1.7:9376")]
    assert outcomes[1]["undecided"] == ("undecided at line 10: -j KUBE-SEP-X3P2623AGDH6CDF3, and chain "
                                        "nat/KUBE-SEP-X3P2623AGDH6CDF3 is not in the dump (a fragment); the walk stops "
                                        "there")


def test_check_node_refuses_a_fragment(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "kpemu.cli", "check-node", "topologies/seed-001.yaml", "--node",
                          "minikube", "--iptables-save", str(PASTED / "debug-service.fragment")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 2
    assert "a fragment (rules without their *table lines, chains missing) cannot be checked" in res.stderr
    assert "Traceback" not in res.stderr
