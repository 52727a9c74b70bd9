"""iptables facts of this machine and the read-back view of `iptables-save` text.

kube-proxy's text is applied as a step of the lab's job (one `iptables-{nft,legacy}-restore
--noflush` with all tables, as kube-proxy does per sync). Its read-back is `iptables-save`
restricted to kube-proxy's (and kubelet's) chains and the built-in-chain rules that jump to them
(`owned_lines`), compared line by line with the expected canonical text (kpemu.jobs.verify).
"""

from __future__ import annotations

import functools
import re
import subprocess
from typing import TYPE_CHECKING

from kpemu.proxy.rules import BUILTIN_CHAINS, split_line
from kpemu.proxy.xtables import RESTORE

if TYPE_CHECKING:
    from kpemu.model.topology import Topology


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
            chain = line.split(maxsplit=2)[1]  # a chain name has no quotes: only a rule's target needs tokens
            if chain in mine or (chain in BUILTIN_CHAINS.get(table, ()) and _target(line) in mine):
                out.setdefault(table, []).append(line.rstrip())
    return out


def _target(line: str) -> str | None:
    toks = split_line(line)
    return toks[toks.index("-j") + 1] if "-j" in toks[:-1] else None


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
