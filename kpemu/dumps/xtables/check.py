"""The checks `iptables-restore` makes of an `iptables-save` dump, made as each line is read: every
value of a rule (addresses with their prefix, ports and port ranges, marks and masks, probabilities,
conntrack states, address types, DNAT/SNAT destinations), every chain a rule is appended to or jumps
to declared in its table before (the jump loop and depth checks are kpemu.dumps.jumps').

Each check raises ValueError naming the field; kpemu.dumps.xtables.read adds the file and the line.
"""

from __future__ import annotations

import re

from kpemu.dumps import values
from kpemu.proxy.rules import Option, ParsedRule

# targets iptables loads as extensions (libxt_*/libipt_*); any other target must be a declared chain
TARGETS = frozenset((
    "ACCEPT", "DROP", "RETURN", "QUEUE", "REJECT", "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP", "MARK",
    "CONNMARK", "CONNSECMARK", "SECMARK", "LOG", "NFLOG", "ULOG", "TRACE", "NOTRACK", "CT", "NFQUEUE", "TPROXY",
    "TCPMSS", "TCPOPTSTRIP", "CHECKSUM", "CLASSIFY", "DSCP", "TOS", "TTL", "ECN", "HMARK", "IDLETIMER", "LED",
    "SET", "AUDIT", "TEE", "SYNPROXY", "RATEEST", "CLUSTERIP", "MIRROR", "HL",
))
_STATES = frozenset(("NEW", "ESTABLISHED", "RELATED", "INVALID", "UNTRACKED", "SNAT", "DNAT"))
_ADDRTYPES = frozenset(("UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST", "BLACKHOLE",
                        "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"))
_PROTOCOLS = frozenset(("tcp", "udp", "udplite", "icmp", "icmpv6", "esp", "ah", "sctp", "mh", "all", "gre", "ipip"))
MAX_CHAIN_NAME = 28  # XT_EXTENSION_MAXNAMELEN - 1


def _one(o: Option) -> str:
    if len(o.values) != 1:
        raise ValueError(f"{o.name} takes one value, got {len(o.values)}: the rule is cut short or garbled")
    return o.values[0]


def _nat_to(text: str) -> None:
    """`ADDR[-ADDR][:PORT[-PORT]]` of --to-destination / --to-source."""
    addrs, colon, ports = text.partition(":")
    for a in addrs.split("-", 1):
        values.ipv4(a)
    if colon:
        values.port_range(ports, "-")


def _list(text: str, allowed: frozenset[str], what: str) -> None:
    bad = [v for v in text.split(",") if v not in allowed]
    if bad:
        raise ValueError(f"{bad[0][:40]!r} is not {what} ({', '.join(sorted(allowed))})")


_MATCH_CHECKS = {
    "--dport": lambda v: values.port_range(v), "--sport": lambda v: values.port_range(v),
    "--destination-port": lambda v: values.port_range(v), "--source-port": lambda v: values.port_range(v),
    "--dports": lambda v: [values.port_range(p) for p in v.split(",")],
    "--sports": lambda v: [values.port_range(p) for p in v.split(",")],
    "--ports": lambda v: [values.port_range(p) for p in v.split(",")],
    "--mark": values.mark_mask, "--probability": values.probability,
    "--every": lambda v: values.integer(v, 1, 0xFFFFFFFF), "--packet": lambda v: values.integer(v, 0, 0xFFFFFFFF),
    "--ctstate": lambda v: _list(v, _STATES, "a conntrack state"),
    "--state": lambda v: _list(v, _STATES, "a conntrack state"),
    "--src-type": lambda v: _list(v, _ADDRTYPES, "an address type"),
    "--dst-type": lambda v: _list(v, _ADDRTYPES, "an address type"),
    "--seconds": lambda v: values.integer(v, 0, 0xFFFFFFFF), "--hitcount": lambda v: values.integer(v, 0, 0xFFFF),
    "--mode": lambda v: _list(v, frozenset(("random", "nth")), "a statistic mode"),
}
_TARGET_CHECKS = {
    "--to-destination": _nat_to, "--to-source": _nat_to, "--to-ports": lambda v: values.port_range(v, "-"),
    "--set-xmark": values.mark_mask, "--set-mark": values.mark_mask, "--or-mark": values.mark,
    "--and-mark": values.mark, "--xor-mark": values.mark,
}


_MARK_OPTIONS = frozenset(("--set-xmark", "--set-mark", "--or-mark", "--and-mark", "--xor-mark"))
_NAT_FLAGS = frozenset(("--random", "--random-fully", "--persistent"))
# the options of the targets kube-proxy writes (their libxt_* parsers refuse any other); others are not checked
_TARGET_OPTIONS: dict[str, frozenset[str]] = {
    "MARK": _MARK_OPTIONS, "DNAT": _NAT_FLAGS | {"--to-destination"}, "SNAT": _NAT_FLAGS | {"--to-source"},
    "MASQUERADE": _NAT_FLAGS | {"--to-ports"}, "REJECT": frozenset(("--reject-with",)),
    "ACCEPT": frozenset(), "DROP": frozenset(), "RETURN": frozenset(),
}


# the options of the matches whose save form kpemu writes (kpemu.proxy.save): their libxt_* parsers refuse others
_MATCH_OPTIONS: dict[str, frozenset[str]] = {
    "comment": frozenset(("--comment",)), "mark": frozenset(("--mark",)), "nfacct": frozenset(("--nfacct-name",)),
    "statistic": frozenset(("--mode", "--probability", "--every", "--packet")),
    "recent": frozenset(("--set", "--rcheck", "--update", "--remove", "--seconds", "--reap", "--hitcount", "--rttl",
                         "--name", "--mask", "--rsource", "--rdest")),
}
_RECENT_ACTIONS = ("--set", "--rcheck", "--update", "--remove")


_VALUED = frozenset(("--nfacct-name", "--comment", "--name", "--mask", "--reject-with", "--log-prefix", "--log-level",
                     "--nflog-group", "--nflog-prefix", "--queue-num", "--set-class", "--tcp-flags", "--physdev-in",
                     "--physdev-out", "--uid-owner", "--gid-owner", "--limit", "--limit-burst"))


def _check(o: Option, checks: dict) -> None:
    check = checks.get(o.name)
    if check is None:
        if o.name in _VALUED and not o.values:
            raise ValueError(f"{o.name} without its value: the rule is cut short")
        return
    try:
        check(_one(o))
    except ValueError as e:
        raise ValueError(f"{o.name}: {e}") from None


_OPTION = re.compile(r"-[a-zA-Z]|--[a-zA-Z0-9][a-zA-Z0-9-]*")


def check_values(p: ParsedRule) -> None:
    """Every value of a parsed rule is one iptables accepts (ValueError naming the option)."""
    for o in (*p.base, *(o for m in p.matches for o in m.options), *p.target_options):
        if not _OPTION.fullmatch(o.name):
            raise ValueError(f"{o.name[:40]!r} is not an option as iptables-save prints them (-x or --name VALUE)")
    for o in p.base:
        if o.name in ("-s", "-d"):
            try:
                values.ipv4_net(_one(o))
            except ValueError as e:
                raise ValueError(f"{o.name}: {e}") from None
        elif o.name == "-p":
            v = _one(o)
            if v.lower() not in _PROTOCOLS and not (v.isdigit() and int(v[:4]) <= 255 and len(v) <= 3):
                raise ValueError(f"-p: {v[:40]!r} is not a protocol (tcp, udp, sctp, icmp, all or 0-255)")
        elif o.name in ("-i", "-o") and len(_one(o)) > 15:
            raise ValueError(f"{o.name}: interface name longer than 15 characters")
    for m in p.matches:
        known = _MATCH_OPTIONS.get(m.module)
        for o in m.options:
            if known is not None and o.name not in known:
                raise ValueError(f"-m {m.module}: {o.name[:40]} is not an option iptables-save prints for it (it "
                                 f"prints {', '.join(sorted(known))})")
            _check(o, _MATCH_CHECKS)
        if m.module == "recent" and not any(o.name in _RECENT_ACTIONS for o in m.options):
            raise ValueError(f"-m recent needs one of {', '.join(_RECENT_ACTIONS)}: the rule is cut short or garbled")
            if o.name == "--match-set" and (len(o.values) != 2 or not set(o.values[1].split(",")) <= {"src", "dst"}):
                raise ValueError("--match-set: expected NAME src|dst[,src|dst...]")
    known = _TARGET_OPTIONS.get(p.target or "")
    for o in p.target_options:
        if known is not None and o.name not in known:
            raise ValueError(f"-j {p.target}: unknown option {o.name[:40]} (iptables-restore refuses it); expected "
                             f"{', '.join(sorted(known)) or 'no option'}")
        _check(o, _TARGET_CHECKS)
    if p.target == "MARK" and len(p.target_options) != 1:
        raise ValueError(f"-j MARK takes one of {', '.join(sorted(_MARK_OPTIONS))} (iptables-restore refuses "
                         f"{'none' if not p.target_options else 'more than one'}): the rule is cut short or garbled")


def chain_name(name: str) -> None:
    """A chain name iptables accepts."""
    if not name or len(name) > MAX_CHAIN_NAME or name.startswith(("-", "!")) or name in TARGETS:
        raise ValueError(f"chain name {name[:40]!r}: at most {MAX_CHAIN_NAME} characters, not an option or a "
                         "target's name")
