"""Read `nft -j list ruleset` (libnftables JSON, libnftables-json(5)) with the standard json module
(pure): kube-proxy's table is turned into the text `nft list ruleset` prints for it, statement by
statement, and read by the text reader (kpemu.dumps.nft.read), so both forms give the same model and
pass the same checks. The other tables are named and their base chains' hooks, priorities and policies
kept; their rules are not read (the walk is undecided at each of those chains). A problem names the JSON element
(`nftables[12] (rule of chain services)`), as a text dump's names its line.

What libnftables 1.0.6's JSON leaves out: a set's `dynamic` flag (told, for certain, by a rule that
updates the set), the table's and the chains' comments (then None: check-node compares such a dump without
comments, and says so).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from kpemu.errors import InputError, Problem
from kpemu.proxy.nftables.listing import duration_text
from kpemu.proxy.nftables.tx import FAMILY, TABLE

_NAME = re.compile(r"[A-Za-z0-9_.:/@+-]{1,256}")
# meta keys nft prints without `meta` (src/meta.c: meta_key_is_unqualified)
_UNQUALIFIED = ("iif", "oif", "iifname", "oifname", "iiftype", "oiftype", "iifgroup", "oifgroup", "skuid", "skgid",
                "nftrace", "rtclassid", "ibriport", "obriport", "ibrname", "obrname", "pkttype", "cpu", "cgroup")
_HEX_KEYS = ("mark",)  # nft prints a mark as 0x%08x
_BINOPS = ("&", "|", "^", "<<", ">>")
_VERDICTS = ("accept", "drop", "return", "continue")


class _Bad(ValueError):
    """A JSON element that is not what libnftables prints."""


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise _Bad(f"{what} {str(value)[:40]!r} is not a name nft prints")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise _Bad(f"{what} {str(value)[:40]!r}: expected a number 0 to 2^64-1")
    return value


def _value(v: Any, hexa: bool = False) -> str:
    if isinstance(v, bool) or v is None:
        raise _Bad(f"value {v!r}: expected a string, a number or an expression")
    if isinstance(v, int):
        _int(v, "value")
        return f"0x{v:08x}" if hexa else str(v)
    if isinstance(v, str):
        if not v or any(c in v for c in '"{}\n;#') or v != v.strip():
            raise _Bad(f"value {v[:40]!r} is not one nft prints")
        return v
    return expr(v, hexa)


def _one(d: Any, what: str) -> tuple[str, Any]:
    if not isinstance(d, dict) or len(d) != 1:
        raise _Bad(f"{what}: expected an object of one key, got {json.dumps(d)[:60]}")
    return next(iter(d.items()))


def _flags(v: Any) -> list[str]:
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list) or not all(isinstance(f, str) and _NAME.fullmatch(f) for f in items):
        raise _Bad(f"flags {json.dumps(v)[:40]}: expected a name or a list of names")
    return items


def _is_hex(e: Any) -> bool:
    """Whether an expression's values print in hex (a mark)."""
    if isinstance(e, dict) and len(e) == 1:
        key, body = next(iter(e.items()))
        if key in ("meta", "ct") and isinstance(body, dict):
            return body.get("key") in _HEX_KEYS
        if key in _BINOPS and isinstance(body, list) and body:
            return _is_hex(body[0])
    return False


def expr(e: Any, hexa: bool = False) -> str:
    """One libnftables expression as nft prints it."""
    if not isinstance(e, dict):
        return _value(e, hexa)
    key, body = _one(e, "expression")
    if key == "payload":
        return f"{_name(body['protocol'], 'protocol')} {_name(body['field'], 'field')}"
    if key == "meta":
        k = _name(body["key"], "meta key")
        return k if k in _UNQUALIFIED else f"meta {k}"
    if key == "ct":
        k = _name(body["key"], "ct key")
        return f"ct {_name(body['dir'], 'ct direction')} {k}" if "dir" in body else f"ct {k}"
    if key == "fib":
        return f"fib {' . '.join(_flags(body['flags']))} {_name(body['result'], 'fib result')}"
    if key == "numgen":
        offset = _int(body.get("offset", 0), "offset")
        text = f"numgen {_name(body['mode'], 'numgen mode')} mod {_int(body['mod'], 'modulus')}"
        return text + (f" offset {offset}" if offset else "")
    if key == "concat":
        return " . ".join(expr(x) for x in _list(body, "concat"))
    if key == "prefix":
        return f"{_value(body['addr'])}/{_int(body['len'], 'prefix length')}"
    if key == "range":
        lo, hi = _list(body, "range", 2)
        return f"{_value(lo, hexa)}-{_value(hi, hexa)}"
    if key == "set":
        items = [_element(x, hexa) for x in _list(body, "set")] if isinstance(body, list) else [_value(body, hexa)]
        return items[0] if len(items) == 1 else "{ " + ", ".join(items) + " }"
    if key == "elem":
        return _value(body["val"], hexa)
    if key in _BINOPS:
        left, right = _list(body, key, 2)
        return f"{expr(left)} {key} {_value(right, _is_hex(left))}"
    if key in ("jump", "goto"):
        return f"{key} {_name(body['target'], 'chain')}"
    if key in _VERDICTS:
        return key
    raise _Bad(f"expression {key[:40]!r}: kpemu reads the expressions kube-proxy's table holds (payload, meta, ct, "
               "fib, numgen, concat, prefix, range, set, binary operations, verdicts)")


def _element(x: Any, hexa: bool = False) -> str:
    if isinstance(x, list):  # a map element: [key, value]
        k, v = _list(x, "map element", 2)
        return f"{_element(k, hexa)} : {expr(v)}"
    if isinstance(x, dict) and "elem" in x:
        body = x["elem"]
        text = _value(body["val"], hexa)
        if "comment" in body:
            text += f' comment "{_comment(body["comment"])}"'
        return text
    return _value(x, hexa)


def _list(v: Any, what: str, n: int | None = None) -> list[Any]:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise _Bad(f"{what}: expected a list{f' of {n}' if n else ''}, got {json.dumps(v)[:60]}")
    return v


def _comment(v: Any) -> str:
    if not isinstance(v, str) or '"' in v or "\n" in v or "\\" in v:
        raise _Bad(f"comment {str(v)[:40]!r}: expected a string without quotes")
    return v


def _match(body: dict) -> str:
    op = body.get("op", "==")
    left, right = expr(body["left"]), _value(body["right"], _is_hex(body["left"]))
    if op in ("==", "in"):
        binop = isinstance(body["left"], dict) and next(iter(body["left"]), "") in _BINOPS
        return f"{left} == {right}" if binop else f"{left} {right}"
    if op in ("!=", "<", ">", "<=", ">="):
        return f"{left} {op} {right}"
    raise _Bad(f"match operator {str(op)[:20]!r}: expected ==, !=, in, <, >, <= or >=")


def _statement(s: Any) -> str:
    key, body = _one(s, "statement")
    if key == "match":
        return _match(body)
    if key in _VERDICTS and body is None:
        return key
    if key in ("jump", "goto"):
        return expr(s)
    if key == "counter":
        return "counter" if body is None else \
            f"counter packets {_int(body['packets'], 'packets')} bytes {_int(body['bytes'], 'bytes')}"
    if key == "reject":  # nft prints its default for family ip (icmp port-unreachable) as a bare `reject`
        if not body or (body.get("type"), body.get("expr")) == ("icmp", "port-unreachable"):
            return "reject"
        return f"reject with {_name(body['type'], 'reject type')} {_value(body['expr'])}"
    if key == "masquerade":
        return "masquerade" if not body else f"masquerade {','.join(_flags(body['flags']))}"
    if key == "dnat":
        port = f":{_int(body['port'], 'port')}" if "port" in body else ""
        return f"dnat to {_value(body['addr'])}{port}"
    if key == "mangle":
        target = body["key"]
        return f"{expr(target)} set {_value(body['value'], _is_hex(target))}"
    if key == "vmap":
        return f"{expr(body['key'])} vmap {_vmap_data(body['data'])}"
    if key == "set":
        return f"{_name(body['op'], 'set operation')} {_value(body['set'])} {{ {expr(body['elem'])} }}"
    raise _Bad(f"statement {key[:40]!r}: kpemu reads the statements kube-proxy's table holds (match, verdicts, "
               "counter, reject, masquerade, dnat, mangle, vmap, set update)")


def _vmap_data(d: Any) -> str:
    if isinstance(d, str):
        return _value(d)
    key, body = _one(d, "vmap data")
    if key != "set":
        raise _Bad(f"vmap data {key[:40]!r}: expected @map or an anonymous map")
    return "{ " + ", ".join(_element(x) for x in _list(body, "vmap elements")) + " }"


def _set_lines(kind: str, s: dict, dynamic: bool = False) -> list[str]:
    """The text of a set or map; `dynamic`: rules update it from the packet path, which the kernel
    allows only in a dynamic set (nft_dynset.c), a flag libnftables 1.0.6's JSON leaves out."""
    t = s["type"]
    if isinstance(t, dict):
        raise _Bad(f"{kind} {s.get('name')}: a typeof {kind}; kube-proxy's sets and maps have a type")
    types = [_name(x, "type") for x in (t if isinstance(t, list) else [t])]
    type_text = " . ".join(types)
    if kind == "map":
        type_text += f" : {_name(s['map'], 'map data type')}"
    lines = [f"{kind} {_name(s['name'], kind)} {{", f"type {type_text}"]
    flags = _flags(s.get("flags", []))
    if dynamic and "dynamic" not in flags:
        flags = ["dynamic", *flags]
    if flags:
        lines.append(f"flags {','.join(flags)}")
    if "timeout" in s:
        lines.append(f"timeout {duration_text(_int(s['timeout'], 'timeout'))}")
    if "comment" in s:
        lines.append(f'comment "{_comment(s["comment"])}"')
    if s.get("elem"):
        hexa = False
        lines.append("elements = { " + ", ".join(_element(x, hexa) for x in _list(s["elem"], "elem")) + " }")
    return [*lines, "}"]


def _chain_head(c: dict) -> list[str]:
    lines = [f"chain {_name(c['name'], 'chain')} {{"]
    if "hook" in c:
        prio = c["prio"]
        if isinstance(prio, bool) or not isinstance(prio, int) or not -2**31 <= prio < 2**31:
            raise _Bad(f"chain {c['name']}: priority {str(prio)[:20]!r}: expected a number")
        lines.append(f"type {_name(c['type'], 'chain type')} hook {_name(c['hook'], 'hook')} priority {prio}; "
                     f"policy {_name(c.get('policy', 'accept'), 'policy')};")
    if "comment" in c:
        lines.append(f'comment "{_comment(c["comment"])}"')
    return lines


def _guard(i: int, what: str, path: str, make: Callable[[], Any]) -> Any:
    try:
        return make()
    except _Bad as e:
        raise InputError([Problem(path, f"nftables[{i}] ({what})", str(e))]) from None
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        missing = f"has no {e}" if isinstance(e, KeyError) else f"is not what libnftables prints ({e})"
        raise InputError([Problem(path, f"nftables[{i}] ({what})", f"the element {missing[:120]}; save the output "
                                                                   "of nft -j list ruleset again, unedited")]) from None
    except RecursionError:
        raise InputError([Problem(path, f"nftables[{i}] ({what})", "expressions nested deeper than nft prints")]) \
            from None


def ruleset_text(text: str, path: str) -> tuple[str, dict[int, tuple[int, str]]]:
    """The `nft list ruleset` text of a `nft -j list ruleset` document, and for each of its lines the
    JSON element it came from (index, what) so that a problem names the element."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError([Problem(path, f"line {e.lineno}", f"column {e.colno}: not JSON ({e.msg}); expected the "
                                                            "output of nft -j list ruleset")]) from None
    except RecursionError:
        raise InputError([Problem(path, "", "JSON nested deeper than nft prints")]) from None
    except ValueError as e:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise InputError([Problem(path, "", f"{str(e).split(';')[0]}: a number longer than nft prints; save the "
                                            "output of nft -j list ruleset again, unedited")]) from None
    items = doc.get("nftables") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise InputError([Problem(path, "", "not libnftables JSON: expected {\"nftables\": [...]} (nft -j list "
                                            "ruleset)")])
    others: list[tuple[int, str]] = []
    heads: dict[str, list[tuple[int, list[str]]]] = {}  # another table's base chains (by `family name`)
    objects: list[tuple[int, str, str, dict]] = []  # sets and maps
    chains: dict[str, tuple[int, list[str], list[tuple[int, str]]]] = {}
    kube = None
    for i, item in enumerate(items):
        kind, body = _guard(i, "element", path, lambda item=item: _one(item, "element"))
        if kind == "metainfo":
            continue
        what = f"{kind} {str(body.get('name', body.get('chain', '')))[:60]}" if isinstance(body, dict) else kind
        family, table = _guard(i, what, path, lambda body=body, kind=kind: (
            _name(body["family"], "family"), _name(body["name" if kind == "table" else "table"], "table")))
        mine = (family, table) == (FAMILY, TABLE)
        if kind == "table":
            if mine:
                kube = i
            else:
                others.append((i, f"table {family} {table} {{"))
        elif not mine:
            if kind == "chain" and family in ("ip", "inet") and isinstance(body, dict) and "hook" in body:
                # another IPv4 table's base chain: its hook, priority and policy, not its rules (kpemu.dumps.nft.read)
                head = _guard(i, what, path, lambda b=body: _chain_head(b))
                heads.setdefault(f"{family} {table}", []).append((i, head))
            continue
        elif kind in ("set", "map"):
            _guard(i, what, path, lambda b=body, k=kind: _set_lines(k, b))
            objects.append((i, what, kind, body))
        elif kind == "chain":
            name = _guard(i, what, path, lambda b=body: _name(b["name"], "chain"))
            chains[name] = (i, _guard(i, what, path, lambda b=body: _chain_head(b)), [])
        elif kind == "rule":
            chain = _guard(i, what, path, lambda b=body: _name(b["chain"], "chain"))
            what = f"rule of chain {chain}"
            if chain not in chains:
                raise InputError([Problem(path, f"nftables[{i}] ({what})", f"no chain {chain} listed before it")])
            rule = _guard(i, what, path, lambda b=body: " ".join(_statement(s) for s in _list(b["expr"], "expr")) + (
                f' comment "{_comment(b["comment"])}"' if "comment" in b else ""))
            chains[chain][2].append((i, rule))
        else:
            msg = f"{kind[:40]!r} in table ip kube-proxy: kube-proxy writes sets, maps, chains and rules"
            raise InputError([Problem(path, f"nftables[{i}] ({kind})", msg)])
    lines: list[str] = []
    where: dict[int, tuple[int, str]] = {}

    def put(i: int, what: str, text: str) -> None:
        lines.append(text)
        where[len(lines)] = (i, what)

    def other(i: int, head: str) -> None:
        put(i, head[:-2], head)
        for j, chain in heads.get(head[6:-2], ()):
            for line in (*chain, "}"):
                put(j, chain[0][:-2], line)
        put(i, head[:-2], "}")

    for i, head in others:  # the tables in the document's order (the walk's order at equal priorities)
        if kube is not None and kube < i:
            break
        other(i, head)
    if kube is not None:
        put(kube, "table ip kube-proxy", f"table {FAMILY} {TABLE} {{")
        updated = {m for _, (_, _, rules) in chains.items() for _, r in rules
                   for m in re.findall(r"\b(?:update|add) @(\S+)", r)}
        for i, what, kind, body in objects:
            for line in _set_lines(kind, body, body["name"] in updated):
                put(i, what, line)
        for name, (i, head, rules) in chains.items():
            for line in head:
                put(i, f"chain {name}", line)
            for j, rule in rules:
                put(j, f"rule of chain {name}", rule)
            put(i, f"chain {name}", "}")
        put(kube, "table ip kube-proxy", "}")
        for i, head in others:
            if kube < i:
                other(i, head)
    return "\n".join(lines) + "\n", where
