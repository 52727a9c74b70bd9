"""An imported topology written out as a kpemu topology file (`kpemu import`)."""

from __future__ import annotations

from kpemu.k8s.convert import Imported


def render_topology(imported: Imported, sources: list[str]) -> str:
    """The topology as YAML, headed by comments: where it came from, the import's notes, and the
    fields of the objects kpemu does not model (with how many objects carry each)."""
    import yaml

    lines = [f"# kpemu topology imported from {', '.join(sources)} (kpemu import)."]
    if imported.notes:
        lines.append("# Notes:")
        lines += [f"#   {n}" for n in imported.notes]
    if imported.unmodelled:
        lines.append("# Not modelled (fields kpemu does not read; in how many objects):")
        for kind, fields in imported.unmodelled.items():
            lines.append(f"#   {kind}:")
            lines += [f"#     {f} ({n})" for f, n in fields.items()]
    body = yaml.safe_dump(imported.data, sort_keys=False, default_flow_style=None, width=120)
    return "\n".join(lines) + "\n" + body
