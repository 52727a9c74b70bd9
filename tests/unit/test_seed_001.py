"""Seed 001: `kpemu rules topologies/seed-001.yaml --node minikube --format iptables-save` must
contain exactly the seed dump's -A lines, chain by chain (kube-proxy/kubelet chains and the
built-in chain jumps), in the same order, with nothing extra in those chains."""

from __future__ import annotations

from tests.helpers import ROOT, kpemu

SEED = ROOT / "tests" / "data" / "seed-001.rules"


def _by_chain(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-A "):
            out.setdefault(f"{table}/{line.split()[1]}", []).append(line.rstrip())
    return out


def _kpemu_rules() -> str:
    res = kpemu("rules", str(ROOT / "topologies" / "seed-001.yaml"), "--node", "minikube", "--format", "iptables-save")
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_seed_dump_file_is_complete() -> None:
    seed = _by_chain(SEED.read_text())
    assert sum(len(v) for v in seed.values()) == 25
    assert set(seed) >= {"nat/KUBE-SVC-4N57TFCL4MD7ZTDA", "filter/KUBE-FORWARD", "filter/INPUT"}


def test_kpemu_rules_equal_the_seed_per_chain() -> None:
    seed = _by_chain(SEED.read_text())
    ours = _by_chain(_kpemu_rules())
    assert set(ours) == set(seed), f"chains differ: extra {set(ours) - set(seed)}, missing {set(seed) - set(ours)}"
    for chain, lines in seed.items():
        assert ours[chain] == lines, f"{chain} differs"
