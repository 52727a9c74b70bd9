"""The IPVS listings people paste (`ipvsadm -Ln`, `--stats`, `--rate`, `--exact`; `ipset list`) read as
the rule formats are (`ipvsadm -Sn`, `ipset save`), told apart by their text, every unreadable line
refused naming the file and the line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kpemu.dumps.xtables.listed import LIST, RATE, STATS, UNKNOWN_SCHEDULER
from kpemu.dumps.xtables.read import parse_ipset_save, read_ipvs
from kpemu.errors import InputError
from kpemu.proxy.ipvs.ipvsadm_text import ipvsadm_save
from tests.helpers import ROOT

PASTED = ROOT / "tests" / "data" / "pasted"


def _error(reader, text: str) -> str:
    with pytest.raises(InputError) as e:
        reader(text, "node.txt")
    return str(e.value)


def test_ipvsadm_Ln_reads_as_the_Sn_lines_it_stands_for() -> None:
    listing = read_ipvs((PASTED / "opsnull-251.ipvsadm-Ln").read_text(), "f")
    assert listing.form == LIST
    save = ipvsadm_save(listing.servers).splitlines()
    assert "-A -t 10.254.0.1:443 -s rr -p 10800" in save
    assert save[save.index("-A -t 10.254.0.1:443 -s rr -p 10800") + 1:][:2] == [
        "-a -t 10.254.0.1:443 -r 172.16.16.81:6443 -m -w 1", "-a -t 10.254.0.1:443 -r 172.16.16.82:6443 -m -w 1"]
    assert len(listing.servers) == 7


def test_ipvsadm_Ln_with_sctp_and_udp_services() -> None:
    servers = read_ipvs((PASTED / "sctp-81477.ipvsadm-Ln").read_text(), "f").servers
    assert [(v.protocol, v.address, v.port, len(v.real_servers)) for v in servers][-3:] == [
        ("UDP", "10.96.0.10", 53, 2), ("SCTP", "10.0.2.15", 31514, 3), ("SCTP", "10.103.164.9", 1000, 3)]


_STATS = """IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
  -> RemoteAddress:Port
TCP  10.96.0.1:443                       12      345K        0      20M        0
  -> 192.168.49.2:8443                   12      345K        0      20M        0
"""


def test_stats_and_rate_list_no_scheduler_and_say_so() -> None:
    stats = read_ipvs(_STATS, "f")
    rate = read_ipvs(_STATS.replace("Conns   InPkts  OutPkts  InBytes OutBytes", "CPS    InPPS   OutPPS    InBPS   "
                                                                                 "OutBPS"), "f")
    assert (stats.form, rate.form) == (STATS, RATE)
    assert [(v.scheduler, [(r.address, r.port) for r in v.real_servers]) for v in stats.servers] == [
        (UNKNOWN_SCHEDULER, [("192.168.49.2", 8443)])]


def test_listing_faults_name_the_line() -> None:
    head = "Prot LocalAddress:Port Scheduler Flags\n"
    assert _error(read_ipvs, head + "TCP  10.96.0.1:https rr\n") == (
        "node.txt: line 2: service: 'https' is not a port (0-65535) (ipvsadm -L without -n prints names: run "
        "ipvsadm -Ln)")
    assert _error(read_ipvs, head + "TCP  10.96.0.1:443 bogus\n") == (
        "node.txt: line 2: service: scheduler 'bogus'; expected one of rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, "
        "nq, fo, ovf, mh, twos (ipvsadm -Ln)")
    assert _error(read_ipvs, head + "TCP  10.96.0.1:443 rr\n  -> x.x.x.x:6443 Masq 1 0 0\n") == (
        "node.txt: line 3: real server: 'x.x.x.x' is not an IPv4 address")
    assert _error(read_ipvs, head + "  -> 10.0.0.1:80 Masq 1 0 0\n") == (
        "node.txt: line 2: a real server before any service line")
    assert _error(read_ipvs, head + "FWM  1 rr\n") == (
        "node.txt: line 2: a firewall-mark service (FWM): kube-proxy creates none and kpemu models address services "
        "only")
    assert _error(read_ipvs, head + "TCP  10.96.0.1:443 rr persistent\n") == (
        "node.txt: line 2: persistent without its value: the line is cut short")


def test_ipset_list_reads_as_ipset_save() -> None:
    listed = parse_ipset_save((PASTED / "sealos-2108.ipset-list").read_text(), "f")
    saved = parse_ipset_save("create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\n" + "".join(
        f"add KUBE-CLUSTER-IP {m}\n" for m in ("10.68.135.246,tcp:39080", "10.68.101.223,tcp:35621",
                                              "10.68.160.21,tcp:59000", "10.68.67.1,tcp:38888", "10.68.0.10,udp:53",
                                              "10.68.33.120,tcp:443", "10.68.0.10,tcp:53", "10.68.164.85,tcp:8848")),
        "g")
    assert listed == saved


def test_ipset_list_faults_name_the_line() -> None:
    one = "Name: KUBE-NODE-PORT-TCP\nType: bitmap:port\nHeader: range 0-65535\n"
    assert _error(parse_ipset_save, one) == (
        "node.txt: line 1: set KUBE-NODE-PORT-TCP has no Members: line (ipset list -t prints none); run ipset list")
    assert _error(parse_ipset_save, one + "Members:\n99999\n") == (
        "node.txt: line 5: set KUBE-NODE-PORT-TCP: member '99999': '99999' is out of range: a port (0-65535) is "
        "0-65535")
    assert _error(parse_ipset_save, "Name: X\nKind: y\n") == (
        "node.txt: line 2: not a line of ipset list: 'Kind: y'; expected Type:, Revision:, Header:, Size in memory:, "
        "References:, Number of entries: or Members:")


def test_trace_through_pasted_listings() -> None:
    res = subprocess.run([sys.executable, "-m", "kpemu.cli", "trace", "--ipvs", str(PASTED / "opsnull-251.ipvsadm-Ln"),
                          "--ipset", str(PASTED / "sealos-2108.ipset-list"), "--node", "n", "--node-ip",
                          "10.253.102.0", "--src", "10.253.7.7", "--dst", "10.254.0.1:443"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[3:5] == ["  p=0.5  IPVS rr TCP 10.254.0.1:443 -> 172.16.16.81:6443  verdict ACCEPT",
                                            "  p=0.5  IPVS rr TCP 10.254.0.1:443 -> 172.16.16.82:6443  verdict ACCEPT"]
