"""Golden normalisation: run-dependent parts replaced, addresses, fixed ports and flags kept."""

from __future__ import annotations

from pathlib import Path

from kpemu.analyse.expect import check_goldens, write_goldens
from kpemu.analyse.golden import golden_diff, normalise_capture, normalise_line

FIXED = {80, 30080, 8472}
SYN = ("07:17:21.061555 IP 192.168.97.1.29138 > 192.168.97.10.80: Flags [S], seq 2217615960, win 64240, "
       "options [mss 1460,sackOK,TS val 3264197292 ecr 0,nop,wscale 7], length 0")


def test_syn_line_of_seed_000() -> None:
    assert normalise_line(SYN, FIXED) == (
        "IP 192.168.97.1.<port> > 192.168.97.10.80: Flags [S], seq <seq>, win <win>, "
        "options [mss 1460,sackOK,TS val <ts> ecr <ts>,nop,wscale 7], length 0")


def test_fixed_ports_kept_even_when_high_and_ephemeral_replaced_even_when_low() -> None:
    line = "12:00:00.000000001 IP 10.242.72.50.1025 > 10.246.198.17.30080: Flags [P.], seq 1:28, ack 1, length 27"
    assert normalise_line(line, FIXED) == (
        "IP 10.242.72.50.<port> > 10.246.198.17.30080: Flags [P.], seq <seq>, ack <ack>, length 27")


def test_verbose_fields_and_checksums() -> None:
    line = ("12:00:00.5 IP (tos 0x0, ttl 64, id 4242, offset 0, flags [DF], proto TCP (6), length 60) "
            "10.0.0.1.80 > 10.0.0.2.40000: Flags [S.], cksum 0x1c46 (incorrect -> 0x9f1a), seq 1, ack 2")
    out = normalise_line(line, FIXED)
    assert "id <id>" in out and "cksum <cksum>" in out and "incorrect" not in out and "10.0.0.2.<port>" in out


def test_vxlan_continuation_joined_and_pure_acks_dropped() -> None:
    text = "\n".join([
        "08:32:19.545975 IP 192.168.1.100.37161 > 192.168.1.101.8472: OTV, flags [I] (0x08), overlay 0, instance 1",
        "IP 10.244.0.3.46349 > 10.244.1.5.80: Flags [S], seq 1384433344, win 64860, length 0",
        "08:32:19.545999 IP 10.244.0.3.46349 > 10.244.1.5.80: Flags [.], ack 1, win 64, length 0",
        "08:32:19.546975 IP 192.168.1.100.37162 > 192.168.1.101.8472: OTV, flags [I] (0x08), overlay 0, instance 1",
        "IP 10.244.0.3.46350 > 10.244.1.5.80: Flags [S], seq 99, win 64860, length 0",
    ])
    assert normalise_capture(text, FIXED) == [
        "IP 192.168.1.100.<port> > 192.168.1.101.8472: OTV, flags [I] (0x08), overlay 0, instance 1 | "
        "IP 10.244.0.3.<port> > 10.244.1.5.80: Flags [S], seq <seq>, win <win>, length 0"]


UPDATE = "sudo kpemu run scenarios/x.yaml --update-goldens"


def test_golden_roundtrip_and_readable_diff(tmp_path: Path) -> None:
    texts = {"nginx-0_eth0": SYN}
    write_goldens(tmp_path, texts, FIXED)
    assert all(c.ok for c in check_goldens("f", tmp_path, texts, FIXED, UPDATE))
    moved = {"nginx-0_eth0": SYN.replace("192.168.97.1.29138", "10.242.72.50.29138")}
    [check] = check_goldens("f", tmp_path, moved, FIXED, UPDATE)
    assert not check.ok
    assert check.diff.splitlines()[:2] == [f"--- {tmp_path}/nginx-0_eth0.txt", "+++ this run"]
    assert "-IP 192.168.97.1.<port> > 192.168.97.10.80" in check.diff
    assert "+IP 10.242.72.50.<port> > 192.168.97.10.80" in check.diff
    assert check.diff.splitlines()[-1] == f"(if the change is meant: {UPDATE}, then review git diff {tmp_path})"
    assert golden_diff("x", ["a"], ["a"]) == ""


def test_missing_golden_fails(tmp_path: Path) -> None:
    [check] = check_goldens("f", tmp_path / "none", {"client_eth0": SYN}, FIXED, UPDATE)
    assert not check.ok and check.seen == f"none (if this capture point is new, write it with: {UPDATE})"
