"""`kpemu inspect` as a short human table: labs, members, interfaces, addresses, routes (pure)."""

from __future__ import annotations

from typing import Any


def render_inspect(data: dict[str, Any]) -> str:
    """Text for `kpemu inspect` from lab.inspect()'s dict."""
    out: list[str] = []
    labs = data.get("labs", [])
    if not labs:
        out.append("no kpemu labs")
    for lab in labs:
        state = "" if lab.get("complete", True) else " (incomplete)"
        out.append(f"lab {lab['lab']}{state}  {lab.get('source', '')}".rstrip())
        for m in lab.get("members", []):
            out.append(f"  {m['member']} ({m.get('kind', '')}) netns {m.get('netns', '')}")
            for i in m.get("interfaces", []):
                if i["name"] == "lo":
                    continue
                master = f" master {i['master']}" if i.get("master") else ""
                kind = f" {i['kind']}" if i.get("kind") else ""
                addrs = " ".join(i.get("addresses", [])) or "-"
                out.append(f"    {i['name']:<16}{kind:<8} {i.get('state') or '':<8} {addrs}{master}")
            for r in m.get("routes", []):
                via = f" via {r['via']}" if r.get("via") else ""
                dev = f" dev {r['dev']}" if r.get("dev") else ""
                extra = " onlink" if r.get("onlink") else ""
                typ = "" if r.get("type") == "unicast" else f"{r.get('type')} "
                out.append(f"    route {typ}{r['dst']}{via}{dev}{extra}")
    if data.get("orphans"):
        out.append("orphan namespaces (no state file): " + " ".join(data["orphans"]))
    return "\n".join(out) + "\n"
