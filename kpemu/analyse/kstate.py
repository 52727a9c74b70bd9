"""Parsing what the kernel reports about connections (pure): `conntrack -L`, `ipvsadm -Lnc`."""

from __future__ import annotations


def _tuple(fields: dict[str, str]) -> dict:
    return {"src": fields.get("src"), "dst": fields.get("dst"),
            "sport": int(fields["sport"]) if fields.get("sport", "").isdigit() else None,
            "dport": int(fields["dport"]) if fields.get("dport", "").isdigit() else None}


def parse_conntrack(text: str) -> list[dict]:
    """`conntrack -L` lines -> [{proto, state, original, reply, flags, mark, line}]."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 4 or not words[1].isdigit():
            continue
        halves: list[dict[str, str]] = [{}, {}]
        half, state, flags, mark = 0, None, [], None
        for w in words[3:]:
            if "=" in w:
                k, _, v = w.partition("=")
                if k == "mark":
                    mark = v
                elif k in ("src", "dst", "sport", "dport"):
                    if k in halves[half]:
                        half = 1
                    halves[half][k] = v
            elif w.startswith("["):
                flags.append(w.strip("[]"))
            elif w.isupper():
                state = w
        out.append({"proto": words[0], "state": state, "original": _tuple(halves[0]), "reply": _tuple(halves[1]),
                    "flags": flags, "mark": mark, "line": line.strip()})
    return out


def parse_ipvs_connections(text: str) -> list[dict]:
    """`ipvsadm -Lnc` lines -> [{proto, expire, state, source, virtual, destination, line}]."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) == 6 and words[0] in ("TCP", "UDP", "SCTP"):
            out.append({"proto": words[0], "expire": words[1], "state": words[2], "source": words[3],
                        "virtual": words[4], "destination": words[5], "line": line.strip()})
    return out
