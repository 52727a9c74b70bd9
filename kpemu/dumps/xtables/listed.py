"""Read the human listings people paste of a node's IPVS state (pure): `ipvsadm -Ln` (also with
`--exact`, `--stats`, `--rate`) and `ipset list`, beside the rule formats `ipvsadm -Sn` and `ipset
save` (kpemu.dumps.xtables.read); which one a file holds is told by its text.

Format facts (ipvsadm.c `list_service`/`print_service_entry`, ipset's `list` printer):
- `ipvsadm -Ln` prints `IP Virtual Server version V (size=N)`, a `Prot LocalAddress:Port Scheduler
  Flags` header, then per service `TCP  ADDR:PORT SCHED [(flag,...)] [persistent T [mask M] [pe P]]
  [ops]` and per real server `  -> ADDR:PORT FORWARD WEIGHT ACTIVE INACTIVE` (Masq, Local, Tunnel,
  Route); `--stats` / `--rate` print five counters after each address instead (no scheduler and no
  weight, so a file in those forms cannot say them), `K`/`M`/`G` suffixes unless `--exact`.
- `ipset list` prints per set `Name:`, `Type:`, `Revision:`, `Header:`, `Size in memory:`,
  `References:`, `Number of entries:` (ipset 7), then `Members:` and one member a line, a blank line
  between sets; `ipset list -t` stops before `Members:`.
Lines starting with `#` before the listing's own lines are notes (where a pasted listing came from).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kpemu.dumps import values
from kpemu.errors import InputError, Problem
from kpemu.proxy.ipvs.ipvsadm_text import FLAG_PERSISTENT, FLAG_SCHED2, RealServer, VirtualServer

LIST, STATS, RATE = "ipvsadm -Ln", "ipvsadm -Ln --stats", "ipvsadm -Ln --rate"
UNKNOWN_SCHEDULER = "(scheduler not listed)"
_SCHEDULERS = ("rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos")
_PROTOCOLS = {"TCP": "TCP", "UDP": "UDP", "SCTP": "SCTP"}
_FORWARDS = ("Masq", "Local", "Tunnel", "Route")
_COUNT = re.compile(r"\d{1,20}[KMG]?")
_SERVICE = re.compile(r"(TCP|UDP|SCTP|FWM)\s+(\S+)(?:\s+(.*))?")
_HEADERS = {"Scheduler": LIST, "Conns": STATS, "CPS": RATE}


@dataclass(frozen=True)
class IpvsListing:
    """Virtual servers read from a listing, and its form (LIST, STATS or RATE)."""

    servers: list[VirtualServer]
    form: str


def _bad(path: str, n: int, msg: str) -> InputError:
    return InputError([Problem(path, f"line {n}", msg)])


def is_ipvsadm_listing(text: str) -> bool:
    """Whether the text is `ipvsadm -L` output (not `ipvsadm -S`): its first line is not an -A/-a line."""
    first = _first(text)
    return first.startswith(("IP Virtual Server", "Prot ")) or bool(_SERVICE.match(first))


def _first(text: str) -> str:
    """The first line that is not blank and not a `#` note (a pasted listing's header saying where it is from)."""
    return next((s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")), "")


def _address(value: str, path: str, n: int, what: str) -> tuple[str, int]:
    if value.startswith("["):
        raise _bad(path, n, f"{what} {value[:60]}: an IPv6 address; kpemu models IPv4")
    try:
        values.host_port(value)
    except ValueError as e:
        host, _, port = value.rpartition(":")
        hint = " (ipvsadm -L without -n prints names: run ipvsadm -Ln)" if port and not port.isdigit() else ""
        raise _bad(path, n, f"{what}: {e}{hint}") from None
    host, _, port = value.rpartition(":")
    return host, int(port)


def _counters(words: list[str], path: str, n: int, what: str) -> None:
    if len(words) != 5 or not all(_COUNT.fullmatch(w) for w in words):
        raise _bad(path, n, f"{what}: expected five counters (ipvsadm --stats/--rate), got {' '.join(words)[:60]!r}")


def _service_tail(words: list[str], path: str, n: int) -> tuple[str, int, int]:
    """`SCHED [(flags)] [persistent T [mask M] [pe P]] [ops]` -> (scheduler, flags, timeout)."""
    if not words or words[0] not in _SCHEDULERS:
        got = words[0][:40] if words else "nothing"
        raise _bad(path, n, f"service: scheduler {got!r}; expected one of {', '.join(_SCHEDULERS)} (ipvsadm -Ln)")
    sched, flags, timeout, i = words[0], 0, 0, 1
    if i < len(words) and words[i].startswith("("):
        if not words[i].endswith(")"):
            raise _bad(path, n, f"scheduler flags {words[i][:40]!r} are cut short; expected (flag-1,flag-2)")
        if any(f.endswith("-port") for f in words[i][1:-1].split(",")):
            flags |= FLAG_SCHED2
        i += 1
    while i < len(words):
        word = words[i]
        if word in ("persistent", "mask", "pe"):
            if i + 1 >= len(words):
                raise _bad(path, n, f"{word} without its value: the line is cut short")
            if word == "persistent":
                try:
                    timeout = values.integer(words[i + 1], 0, 0xFFFFFFFF, "a persistence timeout")
                except ValueError as e:
                    raise _bad(path, n, f"persistent: {e}") from None
                flags |= FLAG_PERSISTENT
            i += 2
        elif word == "ops":
            i += 1
        else:
            raise _bad(path, n, f"service: {word[:40]!r}; ipvsadm -Ln prints persistent T, mask M, pe P or ops here")
    return sched, flags, timeout


def read_ipvsadm_listing(text: str, path: str) -> IpvsListing:
    """Virtual servers of an `ipvsadm -Ln [--stats|--rate|--exact]` listing, each value checked."""
    form: str | None = None
    servers: list[VirtualServer] = []
    names: set[str] = set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("IP Virtual Server version", "#")):
            continue
        words = line.split()
        if words[0] == "Prot":
            form = next((f for w, f in _HEADERS.items() if w in words), None)
            if form is None:
                raise _bad(path, n, f"header {line[:60]!r}: expected ipvsadm -Ln's (Scheduler Flags), --stats' (Conns) "
                                    "or --rate's (CPS)")
            continue
        if words[0] == "->":
            if len(words) >= 2 and words[1] == "RemoteAddress:Port":
                continue
            if not servers:
                raise _bad(path, n, "a real server before any service line")
            addr, port = _address(words[1] if len(words) > 1 else "", path, n, "real server")
            vs = servers[-1]
            weight = 1
            if form in (STATS, RATE) or (form is None and len(words) == 7):
                _counters(words[2:], path, n, f"real server {words[1]}")
            else:
                if len(words) != 6 or words[2] not in _FORWARDS:
                    raise _bad(path, n, f"real server {words[1][:40]}: expected 'ADDR:PORT FORWARD WEIGHT ACTIVE "
                                        f"INACTIVE' (forward one of {', '.join(_FORWARDS)})")
                try:
                    weight = values.integer(words[3], 0, 0x7FFFFFFF, "a weight")
                    for count in words[4:]:
                        values.integer(count, 0, 2**64 - 1, "a connection count")
                except ValueError as e:
                    raise _bad(path, n, f"real server {words[1][:40]}: {e}") from None
            if any((r.address, r.port) == (addr, port) for r in vs.real_servers):
                raise _bad(path, n, f"real server {words[1]} of {vs.protocol} {vs.address}:{vs.port} listed twice")
            servers[-1] = VirtualServer(vs.protocol, vs.address, vs.port, vs.scheduler, vs.flags, vs.timeout,
                                        (*vs.real_servers, RealServer(addr, port, weight)))
            continue
        m = _SERVICE.fullmatch(line)
        if m is None:
            raise _bad(path, n, f"not a line of ipvsadm -Ln: {line[:60]!r}; expected 'TCP  ADDR:PORT rr' or "
                                "'  -> ADDR:PORT Masq 1 0 0'")
        if m[1] == "FWM":
            raise _bad(path, n, "a firewall-mark service (FWM): kube-proxy creates none and kpemu models address "
                                "services only")
        addr, port = _address(m[2], path, n, "service")
        tail = (m[3] or "").split()
        if form is None:  # no header: the counters tell --stats/--rate apart from -Ln
            form = STATS if len(tail) == 5 and all(_COUNT.fullmatch(w) for w in tail) else LIST
        if form == LIST:
            sched, flags, timeout = _service_tail(tail, path, n)
        else:
            _counters(tail, path, n, f"service {m[2]}")
            sched, flags, timeout = UNKNOWN_SCHEDULER, 0, 0
        key = f"{m[1]} {addr}:{port}"
        if key in names:
            raise _bad(path, n, f"service {key} listed twice")
        names.add(key)
        servers.append(VirtualServer(_PROTOCOLS[m[1]], addr, port, sched, flags, timeout))
    if form is None and not servers:
        raise InputError([Problem(path, "", "no service in the listing; expected the output of ipvsadm -Ln")])
    return IpvsListing(servers, form or LIST)


def is_ipset_listing(text: str) -> bool:
    """Whether the text is `ipset list` output (not `ipset save`)."""
    return _first(text).startswith("Name:")


_SET_FIELDS = ("Revision:", "Header:", "Size in memory:", "References:", "Number of entries:")


def read_ipset_listing(text: str, path: str) -> list[tuple[int, str, str, list[tuple[int, str]]]]:
    """The sets of an `ipset list`: (line, name, type, [(line, member)]) each; the members are checked by
    the caller as `ipset save`'s are (kpemu.dumps.xtables.read.parse_ipset_save)."""
    sets: list[tuple[int, str, str, list[tuple[int, str]]]] = []
    members: list[tuple[int, str]] | None = None
    typed = True
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or (line.startswith("#") and members is None):
            continue
        if line.startswith("Name:"):
            if sets and members is None:
                raise _bad(path, sets[-1][0], f"set {sets[-1][1]} has no Members: line (ipset list -t prints none); "
                                              "run ipset list")
            if not typed:
                raise _bad(path, sets[-1][0], f"set {sets[-1][1]} has no Type: line")
            name = line[5:].strip()
            if not name or " " in name:
                raise _bad(path, n, f"{line[:60]!r}: expected 'Name: SETNAME'")
            sets.append((n, name, "", []))
            members, typed = None, False
            continue
        if not sets:
            raise _bad(path, n, f"not a line of ipset list: {line[:60]!r}; it starts each set with 'Name: SETNAME'")
        if members is not None:
            members.append((n, line.split()[0]))
        elif line.startswith("Type:"):
            at, name, _, _ = sets[-1]
            sets[-1] = (at, name, line[5:].strip(), sets[-1][3])
            typed = True
        elif line == "Members:":
            members = sets[-1][3]
        elif not line.startswith(_SET_FIELDS):
            raise _bad(path, n, f"not a line of ipset list: {line[:60]!r}; expected Type:, Revision:, Header:, "
                                "Size in memory:, References:, Number of entries: or Members:")
    if sets and (members is None or not typed):
        what = "no Members: line (ipset list -t prints none); run ipset list" if typed else "no Type: line"
        raise _bad(path, sets[-1][0], f"set {sets[-1][1]} has {what}")
    return sets
