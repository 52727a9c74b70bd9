"""The iptables-save canonicaliser against reference section 2.10 (rows copied from real dumps)."""

from __future__ import annotations

import pytest

from kpemu.proxy.rules import parse_rule_line
from kpemu.proxy.save import canonical_line, probability, ruleset_from_restore, save_text


@pytest.mark.parametrize(
    ("written", "saved"),
    [
        ('-A KUBE-SERVICES -m comment --comment "C" -m tcp -p tcp -d 10.96.0.1 --dport 443 -j X',
         '-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "C" -m tcp --dport 443 -j X'),
        ('-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment "default/kubernetes:https cluster IP" -m tcp -p tcp'
         ' -d 10.96.0.1 --dport 443 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ',
         '-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment'
         ' "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ'),
        ('-A KUBE-SEP-U7HH75UFG3U5VGYY -m comment --comment default/kubernetes:https -s 192.168.20.100'
         ' -j KUBE-MARK-MASQ',
         '-A KUBE-SEP-U7HH75UFG3U5VGYY -s 192.168.20.100/32 -m comment --comment "default/kubernetes:https"'
         ' -j KUBE-MARK-MASQ'),
        ('-A KUBE-SEP-X -m comment --comment kube-system/kube-dns:dns -m udp -p udp -j DNAT --to-destination'
         ' 10.244.2.2:53',
         '-A KUBE-SEP-X -p udp -m comment --comment "kube-system/kube-dns:dns" -m udp -j DNAT --to-destination'
         ' 10.244.2.2:53'),
        ("-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"),
        ("-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000", "-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0"),
        ("-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN",
         "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN"),
        ("-A KUBE-SERVICES -j REJECT", "-A KUBE-SERVICES -j REJECT --reject-with icmp-port-unreachable"),
        ("-A S -m recent --name N --set -j X", "-A S -m recent --set --name N --mask 255.255.255.255 --rsource -j X"),
        ("-A S -m recent --name N --rcheck --seconds 10800 --reap -j N",
         "-A S -m recent --rcheck --seconds 10800 --reap --name N --mask 255.255.255.255 --rsource -j N"),
        ('-A S -m comment --comment "default/web:http -> 10.244.1.5:8080" -m statistic --mode random'
         " --probability 0.5000000000 -j KUBE-SEP-A",
         '-A S -m comment --comment "default/web:http -> 10.244.1.5:8080" -m statistic --mode random'
         " --probability 0.50000000000 -j KUBE-SEP-A"),
        ("-A KUBE-NODEPORTS -m nfacct --nfacct-name localhost_nps_accepted_pkts -j X",
         "-A KUBE-NODEPORTS -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j X"),
        # read back from a 6.1 guest kernel (ipvs-firewall at 1.33): libxt_ipvs prints the protocol's number
        ("-A KUBE-IPVS-OUT-FILTER -s 10.240.0.100/32 -m ipvs --vaddr 10.240.0.100 --vproto tcp --vport 80 -j DROP",
         "-A KUBE-IPVS-OUT-FILTER -s 10.240.0.100/32 -m ipvs --vproto 6 --vaddr 10.240.0.100 --vport 80 -j DROP"),
    ],
)
def test_reference_rows(written: str, saved: str) -> None:
    assert canonical_line(parse_rule_line(written)) == saved


@pytest.mark.parametrize(
    ("p", "printed"),
    [("0.5000000000", "0.50000000000"), ("0.50000", "0.50000000000"), ("0.3333333333", "0.33333333349"),
     ("0.25", "0.25000000000"), ("0.2", "0.20000000019"), ("0.33333", "0.33332999982")],
)
def test_probability_round_trip(p: str, printed: str) -> None:
    assert probability(p) == printed


def test_chain_order_builtins_first_then_alphabetical() -> None:
    rs = ruleset_from_restore(
        "*nat\n:KUBE-SVC-B - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n-A KUBE-SVC-B -j KUBE-MARK-MASQ\n"
        "-I POSTROUTING 1 -j KUBE-SVC-B\n-I POSTROUTING 1 -j KUBE-MARK-MASQ\nCOMMIT\n"
    )
    assert save_text(rs, tables=("nat",)) == (
        "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
        ":KUBE-MARK-MASQ - [0:0]\n:KUBE-SVC-B - [0:0]\n-A POSTROUTING -j KUBE-MARK-MASQ\n"
        "-A POSTROUTING -j KUBE-SVC-B\n-A KUBE-SVC-B -j KUBE-MARK-MASQ\nCOMMIT\n"
    )
