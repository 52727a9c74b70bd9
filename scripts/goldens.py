"""Whole-dump goldens: every line of `kpemu rules --format all` for tests/data/rich.yaml (node2) per
proxy mode, at every release whose dump differs from the release before it.

    make goldens         # python -m scripts.goldens: rewrite tests/data/golden/<mode>/<release>.rules
    make goldens-check   # python -m scripts.goldens --check (part of make lint): exit 1 if a golden is
                         # stale, missing or redundant

A new golden is reviewed like code (its diff against the previous release's file is the change a
boundary makes); tests/unit/test_goldens.py checks every modelled release against them. Checked
against upstream source when written: the iptables 1.31 golden's rule shapes are those of
TestOverallIPTablesRules (tests/unit/test_upstream_iptables.py); the IPVS 1.29 golden's
`-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER` and
1.26's INPUT -> KUBE-IPVS-FILTER are pkg/proxy/ipvs/proxier.go's iptablesJumpChain entries; the
nftables 1.34 and 1.36 goldens' rule shapes are those of TestOverallNFTablesRules
(tests/unit/test_proxy_nftables.py). nftables mode's goldens start at 1.29, where the mode starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kpemu.inputs.topology import load_topology
from kpemu.model.modes import MODE_FACTS, NEWEST_MINOR
from kpemu.model.topology import Topology
from kpemu.proxy.render import render_rules

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGY = ROOT / "tests" / "data" / "rich.yaml"
GOLDEN = ROOT / "tests" / "data" / "golden"
NODE = "node2"
# Mode -> the releases it is modelled for.
RELEASES = {name: range(f.first_minor, (f.last_minor or NEWEST_MINOR) + 1) for name, f in MODE_FACTS.items()}
MODES = tuple(RELEASES)


def dump(mode: str, minor: int, topo: Topology | None = None) -> str:
    """`kpemu rules --format all` of the representative topology in `mode` at release 1.<minor>."""
    topo = topo or load_topology(TOPOLOGY)
    kp = topo.kubeProxy.model_copy(update={"mode": mode, "version": f"1.{minor}"})
    return render_rules(topo.model_copy(update={"kubeProxy": kp}), NODE, "all")


def goldens(mode: str) -> dict[int, str]:
    """Release -> dump, for the first release and every release whose dump changes."""
    topo = load_topology(TOPOLOGY)
    out: dict[int, str] = {}
    last = None
    for minor in RELEASES[mode]:
        text = dump(mode, minor, topo)
        if text != last:
            out[minor] = text
        last = text
    return out


def path(mode: str, minor: int) -> Path:
    return GOLDEN / mode / f"1.{minor}.rules"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    bad = []
    for mode in MODES:
        want = {path(mode, m): text for m, text in goldens(mode).items()}
        have = set((GOLDEN / mode).glob("*.rules")) if (GOLDEN / mode).is_dir() else set()
        for p, text in want.items():
            if args.check:
                if not p.is_file() or p.read_text() != text:
                    bad.append(f"stale or missing: {p.relative_to(ROOT)}")
            else:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
        for p in sorted(have - set(want)):
            if args.check:
                bad.append(f"redundant: {p.relative_to(ROOT)}")
            else:
                p.unlink()
    print("\n".join(bad) or "goldens up to date", file=sys.stderr if bad else sys.stdout)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
