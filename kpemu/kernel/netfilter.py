"""Apply kube-proxy's iptables restore input inside a node namespace and verify the read-back.

Effects only: the text comes from kpemu.proxy (iptables.restore_text / save.save_text). All tables
go to one `iptables-{nft,legacy}-restore --noflush` call, as kube-proxy does per sync, run inside
the namespace by a setns() preexec (no `ip netns exec`). The read-back is
`iptables-save` in the same namespace, restricted to kube-proxy's (and kubelet's) chains and the
built-in-chain rules that jump to them, compared line by line with the expected canonical text.
"""

from __future__ import annotations

import functools
import re
import subprocess
from typing import TYPE_CHECKING

from kpemu.errors import ApplyError
from kpemu.kernel.netns import run_in
from kpemu.kernel.readback import check_readback
from kpemu.proxy.rules import BUILTIN_CHAINS, split_line

if TYPE_CHECKING:
    from kpemu.model.topology import Topology

RESTORE = {"nft": "iptables-nft-restore", "legacy": "iptables-legacy-restore"}
SAVE = {"nft": "iptables-nft-save", "legacy": "iptables-legacy-save"}


def restore(ns: str, text: str, backend: str = "nft") -> None:
    """`iptables-restore --noflush` of `text` (all its tables) in netns `ns`, in one call, as kube-proxy
    feeds its *filter and *nat blocks to a single iptables-restore per sync."""
    res = run_in(ns, [RESTORE[backend], "--noflush", "--wait"], input=text)
    if res.returncode != 0:
        tables = ", ".join(re.findall(r"^\*(\S+)", text, re.M))
        raise ApplyError(f"{ns}: {RESTORE[backend]} failed for tables {tables}: {res.stderr.strip()}")


def save(ns: str, backend: str = "nft", table: str | None = None) -> str:
    """`iptables-save` output of netns `ns` (one table or all)."""
    argv = [SAVE[backend], *(["-t", table] if table else [])]
    res = run_in(ns, argv)
    if res.returncode != 0:
        raise ApplyError(f"{ns}: {SAVE[backend]} failed: {res.stderr.strip()}")
    return res.stdout


def owned_lines(save_text: str, chains: dict[str, set[str]]) -> dict[str, list[str]]:
    """Per table, the chain lines and -A lines that belong to `chains` (per table), plus
    built-in-chain rules jumping to one of them, in save order. Counters are zeroed."""
    out: dict[str, list[str]] = {}
    table = ""
    for line in save_text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            continue
        mine = chains.get(table, set())
        if line.startswith(":"):
            name = line[1:].split()[0]
            if name in mine:
                out.setdefault(table, []).append(f":{name} - [0:0]")
        elif line.startswith("-A "):
            toks = split_line(line)
            chain = toks[1]
            target = toks[toks.index("-j") + 1] if "-j" in toks else None
            builtin = chain in BUILTIN_CHAINS.get(table, ())
            if chain in mine or (builtin and target in mine):
                out.setdefault(table, []).append(line.rstrip())
    return out


def verify(ns: str, expected_save: str, chains: dict[str, set[str]], backend: str = "nft") -> None:
    """Compare the namespace's iptables-save with `expected_save` on `chains`; ApplyError if not equal."""
    expected, got = owned_lines(expected_save, chains), owned_lines(save(ns, backend), chains)
    for table in sorted(set(expected) | set(got)):
        check_readback(f"{ns}: iptables-save -t {table}", "\n".join(expected.get(table, [])),
                       "\n".join(got.get(table, [])))


def apply_and_verify(ns: str, restore_text: str, expected_save: str, chains: dict[str, set[str]],
                     backend: str = "nft") -> None:
    """Restore then verify (see restore() and verify())."""
    restore(ns, restore_text, backend)
    verify(ns, expected_save, chains, backend)


@functools.cache
def supports_random_fully(backend: str = "nft") -> bool:
    """Whether kube-proxy would add `--random-fully` here (for randomFully: None).

    kube-proxy decides by the iptables version (`HasRandomFully()`: 1.6.2 or newer), not by trying a
    rule; so does this, with the same binary the node's rules are restored with (the guest runs
    this machine's binaries too). The version does not depend on the namespace.
    """
    try:
        out = subprocess.run([RESTORE[backend].replace("-restore", ""), "--version"], capture_output=True,
                             text=True, check=False).stdout
    except FileNotFoundError:
        return False
    found = re.search(r"v(\d+)\.(\d+)\.(\d+)", out)
    return found is not None and tuple(int(x) for x in found.groups()) >= (1, 6, 2)


def resolve_random_fully(topo: Topology) -> Topology:
    """randomFully: None means "what the node's iptables supports": decide it once."""
    kp = topo.kubeProxy
    if kp.randomFully is not None:
        return topo
    return topo.model_copy(update={"kubeProxy": kp.model_copy(update={"randomFully": supports_random_fully(
        kp.backend)})})
