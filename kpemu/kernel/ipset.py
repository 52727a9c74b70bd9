"""Create a node's ipsets with one `ipset restore` inside its namespace, then verify them."""

from __future__ import annotations

from collections.abc import Sequence

from kpemu.errors import ApplyError
from kpemu.kernel.netns import run_in
from kpemu.kernel.readback import check_readback
from kpemu.proxy import ipset_text
from kpemu.proxy.ipset_text import IpSet


def ipset_save(ns: str, names: set[str] | None = None) -> str:
    """`ipset save` inside `ns` in canonical form, optionally only the sets named in `names`."""
    res = run_in(ns, ["ipset", "save"])
    if res.returncode != 0:
        raise ApplyError(f"{ns}: ipset save failed: {res.stderr.strip()}")
    lines = res.stdout.splitlines()
    if names is not None:
        lines = [ln for ln in lines if len(ln.split()) > 1 and ln.split()[1] in names]
    return ipset_text.canonical_save("\n".join(lines))


def apply_ipsets(ns: str, sets: Sequence[IpSet]) -> None:
    """Create `sets` in `ns` (one `ipset restore -exist`) and check `ipset save` matches them.

    ipsets are per network namespace, so the sets never touch the root namespace.
    """
    res = run_in(ns, ["ipset", "restore", "-exist"], input=ipset_text.restore_input(sets))
    if res.returncode != 0:
        raise ApplyError(f"{ns}: ipset restore failed: {res.stderr.strip()}")
    check_readback(f"{ns}: ipset save", ipset_text.save_text(sets), ipset_save(ns, {s.name for s in sets}))
