"""Which kpemu lab (or probe) a network namespace belongs to: a mark carried by the namespace itself.

A namespace's name is not proof of ownership: lab `flannel`'s member `web-0` and lab `flannel-web`'s
member `0` are both `kp-flannel-web-0`. So every namespace kpemu creates is marked, right after it
appears, with the alias (IFLA_IFALIAS) of its loopback device: `kpemu:lab=<lab>` or `kpemu:probe`.

Why the loopback's alias rather than a file beside the state file (or a record keyed by the
namespace's inode): the mark lives and dies with the namespace, so it can never go stale, never
outlive a removed namespace nor point at a new namespace that reuses an inode, and it survives the
loss of /run/kpemu; it costs no extra device (every namespace has `lo`, always ifindex 1), no route
and no rule, and anyone can read it with `ip -n NS link show lo`. The window between creating a
namespace and marking it is covered by the state file, which records the namespace's name before
it is created.
"""

from __future__ import annotations

from kpemu.kernel import netns as nsmod

MARK = "kpemu:"


def lab_owner(lab: str) -> str:
    """The mark of a lab's namespaces."""
    return f"lab={lab}"


PROBE_OWNER = "probe"


def alias(owner: str) -> str:
    """The loopback alias that marks a namespace as `owner`'s."""
    return MARK + owner


def mark(ns: str, owner: str) -> None:
    """Mark namespace `ns` as `owner`'s."""
    nsmod.run_in(ns, ["ip", "link", "set", "lo", "alias", alias(owner)], check=True)


def owner_of(ns: str) -> str | None:
    """The owner a namespace is marked with, or None (no such namespace, or not marked by kpemu)."""
    if not nsmod.netns_exists(ns):
        return None
    try:
        value = nsmod.loopback_alias(ns)  # netlink in this process: a lab's removal asks every namespace
    except OSError:
        return None
    return value[len(MARK):] if value.startswith(MARK) else None
