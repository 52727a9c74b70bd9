"""The offline iptables walker decides every match of a rule or says it cannot: conntrack state,
interfaces, addrtype, mark, multiport, statistic, owner, unmodelled modules; a fact it was not given
splits the walk (both branches, each naming the fact) and is taken the same way for the rest of the path."""

from __future__ import annotations

from kpemu.analyse.oracle.iptables import predict
from kpemu.analyse.oracle.types import Packet, Route
from kpemu.dumps.xtables.read import parse_iptables_save

NODE = {"127.0.0.1", "192.168.1.10"}


def _rules(filter_rules: str, forward_policy: str = "ACCEPT", nat: str = "") -> str:
    nat_table = ("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                 f":POSTROUTING ACCEPT [0:0]\n{nat}COMMIT\n")
    return (f"{nat_table}*filter\n:INPUT ACCEPT [0:0]\n:FORWARD {forward_policy} [0:0]\n:OUTPUT ACCEPT [0:0]\n"
            f"{filter_rules}COMMIT\n")


def _walk(text: str, pkt: Packet, routes: tuple[Route, ...] = ()):
    return predict(parse_iptables_save(text, "dump"), pkt, NODE, "n", None, routes)


def _last_rules(pred) -> list[str]:
    return [o.steps[-1].text() for o in pred.outcomes]


def test_a_new_syn_passes_related_established_and_reaches_the_reject() -> None:
    text = _rules("-A INPUT -m state --state RELATED,ESTABLISHED -j ACCEPT\n"
                  "-A INPUT -m conntrack --ctstate INVALID -j DROP\n"
                  "-A INPUT -j REJECT --reject-with icmp-host-prohibited\n")
    pred = _walk(text, Packet("192.168.1.50", "192.168.1.10", 8080))
    assert pred.decided
    assert _last_rules(pred) == ["-A INPUT -j REJECT --reject-with icmp-host-prohibited"]
    assert [o.hooks for o in pred.outcomes] == [("PREROUTING", "INPUT")]
    assert pred.verdicts == {"REJECT"}


def test_an_unknown_out_interface_is_undecided_with_both_branches_and_the_line() -> None:
    text = _rules("-A FORWARD -i docker0 -o docker0 -j ACCEPT\n-A FORWARD -j DROP\n")
    pred = _walk(text, Packet("172.17.0.2", "10.0.0.9", 80, iif="docker0"))
    assert not pred.decided
    assert [(a.fact, a.rule, a.where) for a in pred.undecided] == [
        ("-o docker0", "-A FORWARD -i docker0 -o docker0 -j ACCEPT", "line 11")]
    assert sorted((o.verdict, tuple((a.fact, a.holds) for a in o.assumed)) for o in pred.outcomes) == [
        ("ACCEPT", (("-o docker0", True),)), ("DROP", (("-o docker0", False),))]


def test_a_given_out_interface_decides_and_a_wildcard_matches_by_prefix() -> None:
    text = _rules("-A FORWARD -o docker+ -j ACCEPT\n-A FORWARD ! -o flannel.1 -j DROP\n")
    to_flannel = _walk(text, Packet("10.244.0.5", "10.244.1.7", 80, iif="cni0", oif="flannel.1"))
    assert to_flannel.decided
    assert [s.text() for s in to_flannel.outcomes[0].steps] == ["PREROUTING policy ACCEPT", "FORWARD policy ACCEPT",
                                                                  "POSTROUTING policy ACCEPT"]
    to_docker = _walk(text, Packet("10.244.0.5", "172.17.0.2", 80, iif="cni0", oif="docker0"))
    assert [s.text() for s in to_docker.outcomes[0].steps] == [
        "PREROUTING policy ACCEPT", "-A FORWARD -o docker+ -j ACCEPT", "POSTROUTING policy ACCEPT"]


def test_a_route_decides_the_out_interface_and_says_what_it_was_inferred_from() -> None:
    text = _rules("-A FORWARD -o eth0 -j DROP\n")
    route = Route("10.244.1.0/24", "flannel.1", "line 3 (flannel)")
    pred = _walk(text, Packet("10.244.0.5", "10.244.1.7", 80, iif="cni0"), (route,))
    assert pred.decided and pred.verdicts == {"ACCEPT"}
    assert pred.outcomes[0].inferred == ("leaves by flannel.1 to 10.244.1.7: inferred from line 3 (flannel)",)


def test_one_interface_fact_is_taken_the_same_way_for_the_rest_of_the_path() -> None:
    text = _rules("".join(f"-A FORWARD -o docker0 -p tcp --dport {p} -j ACCEPT\n" for p in (81, 82, 80)) +
                  "-A FORWARD -o docker0 -j DROP\n-A FORWARD -o eth0 -j REJECT\n")
    pred = _walk(text, Packet("10.0.0.1", "172.17.0.2", 80, iif="eth1"))
    assert sorted((o.verdict, tuple((a.fact, a.holds) for a in o.assumed)) for o in pred.outcomes) == [
        ("ACCEPT", (("-o docker0", False), ("-o eth0", False))),
        ("ACCEPT", (("-o docker0", True),)),
        ("REJECT", (("-o docker0", False), ("-o eth0", True)))]


def test_a_packet_from_another_host_never_arrives_on_lo() -> None:
    text = _rules("-A INPUT -i lo -j ACCEPT\n-A INPUT -j REJECT\n")
    pred = _walk(text, Packet("192.168.1.50", "192.168.1.10", 22))
    assert pred.decided and pred.verdicts == {"REJECT"}


def test_an_unmodelled_module_is_undecided_naming_the_match_never_assumed_to_match() -> None:
    text = _rules("-A INPUT -p tcp -m limit --limit 5/min -j ACCEPT\n-A INPUT -p udp -m string --string x "
                  "--algo bm -j ACCEPT\n-A INPUT -j DROP\n")
    pred = _walk(text, Packet("192.168.1.50", "192.168.1.10", 22))
    assert [(a.fact, a.why) for a in pred.undecided] == [
        ("-m limit --limit 5/min", "a rate limit depends on the packets before this one")]
    assert sorted(o.verdict for o in pred.outcomes) == ["ACCEPT", "DROP"]


def test_multiport_ranges_marks_and_the_syn_flags() -> None:
    text = _rules("-A INPUT -p tcp -m multiport --dports 20:21,8000:8100 -j DROP\n"
                  "-A INPUT -m mark --mark 0x1/0x1 -j DROP\n"
                  "-A INPUT -p tcp --tcp-flags SYN,ACK SYN -j REJECT\n")
    assert _walk(text, Packet("192.168.1.50", "192.168.1.10", 8080)).verdicts == {"DROP"}
    assert _walk(text, Packet("192.168.1.50", "192.168.1.10", 22, mark=1)).verdicts == {"DROP"}
    assert _walk(text, Packet("192.168.1.50", "192.168.1.10", 22)).verdicts == {"REJECT"}


def test_owner_on_a_forwarded_packet_matches_only_negated_and_nth_is_undecided() -> None:
    text = _rules("-A FORWARD -m owner --uid-owner 0 -j DROP\n-A FORWARD -m owner ! --uid-owner 0 -j REJECT\n")
    assert _walk(text, Packet("10.0.0.1", "10.0.0.2", 80, iif="eth0", oif="eth1")).verdicts == {"REJECT"}
    nth = _rules("-A INPUT -m statistic --mode nth --every 2 --packet 0 -j DROP\n")
    pred = _walk(nth, Packet("192.168.1.50", "192.168.1.10", 22))
    assert [a.fact for a in pred.undecided] == ["-m statistic --mode nth --every 2 --packet 0"]


def test_a_builtin_chain_policy_drop_is_the_verdict_of_a_fall_through() -> None:
    pred = _walk(_rules("", forward_policy="DROP"), Packet("10.0.0.1", "10.0.0.2", 80, iif="eth0", oif="eth1"))
    assert pred.verdicts == {"DROP"} and _last_rules(pred) == ["FORWARD policy DROP"]


def test_notrack_skips_nat_and_ctstate_untracked_matches() -> None:
    raw = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -p tcp --dport 80 -j NOTRACK\nCOMMIT\n"
    text = raw + _rules("-A INPUT -m conntrack --ctstate UNTRACKED -j REJECT\n",
                        nat="-A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.5:80\n")
    pred = _walk(text, Packet("192.168.1.50", "192.168.1.10", 80))
    assert pred.verdicts == {"REJECT"} and pred.endpoints == {}


FLANNEL_NAT = """\
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -o eth0 -j MASQUERADE
-A POSTROUTING -s 10.244.0.0/16 -d 10.244.0.0/16 -j RETURN
-A POSTROUTING -s 10.244.0.0/16 ! -d 224.0.0.0/4 -j MASQUERADE
-A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.1.0/24 -j RETURN
-A POSTROUTING ! -s 10.244.0.0/16 -d 10.244.0.0/16 -j MASQUERADE
COMMIT
"""


def test_flannels_rules_infer_flannel_1_for_other_nodes_pods_so_eth0_masquerade_is_not_taken() -> None:
    from kpemu.analyse.oracle.routes import flannel_routes

    rs = parse_iptables_save(FLANNEL_NAT, "dump")
    routes = flannel_routes(rs)
    assert [(r.net, r.iface) for r in routes] == [("10.244.1.0/24", "cni0"), ("10.244.0.0/16", "flannel.1")]
    pred = predict(rs, Packet("10.244.1.5", "10.244.2.7", 80, iif="cni0"), NODE, "n", None, routes)
    assert pred.decided and pred.masquerade is False
    assert pred.outcomes[0].inferred == (
        "leaves by flannel.1 to 10.244.2.7: inferred from line 8: -A POSTROUTING -s 10.244.0.0/16 ! -d 224.0.0.0/4 "
        "-j MASQUERADE (flannel: other nodes' pods of 10.244.0.0/16, through its VXLAN device flannel.1; --oif for "
        "another backend)",)
    without = predict(rs, Packet("10.244.1.5", "10.244.2.7", 80, iif="cni0"), NODE, "n", None, ())
    assert [a.fact for a in without.undecided] == ["-o eth0"]


def test_trace_takes_iif_and_oif_and_refuses_a_name_no_interface_can_have(tmp_path) -> None:
    from tests.helpers import cli

    dump = tmp_path / "node.iptables-save"
    dump.write_text(FLANNEL_NAT)
    base = ("trace", "--iptables-save", str(dump), "--node", "n", "--node-ip", "192.168.1.10", "--src", "10.244.1.5")
    res = cli(*base, "--dst", "8.8.8.8:53", "--iif", "cni0", "--oif", "eth0")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == ("packet tcp 10.244.1.5:40000 -> 8.8.8.8:53 at node n from outside "
                                          "(in on cni0, out by eth0)")
    assert "masquerade by POSTROUTING; verdict ACCEPT" in res.stdout
    bad = cli(*base, "--dst", "8.8.8.8:53", "--iif", "a/b")
    assert bad.returncode == 2
    assert "--iif 'a/b': expected an interface name of 1 to 15 characters" in bad.stderr
