"""Jump graphs of a dump's chains: a loop (the kernel refuses one: ELOOP) or a nesting deeper than a
stated limit is found iteratively when a table is read, so no walker ever recurses into one."""

from __future__ import annotations


def loop_or_depth(jumps: dict[str, list[tuple[str, int]]], max_depth: int, walker: str) -> tuple[str, int] | None:
    """(what is wrong, the line of the jump) for a jump loop or a nesting deeper than `max_depth`
    (`walker` says whose limit it is) among `jumps` (chain -> [(target chain, line)]), else None.
    Iterative: no recursion per chain, linear in chains and jumps."""
    depth: dict[str, int] = {}  # chain -> longest jump nesting below it (set when done)
    on_path: set[str] = set()
    for root in jumps:
        if root in depth:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        on_path.add(root)
        while stack:
            chain, i = stack[-1]
            edges = jumps.get(chain, [])
            if i < len(edges):
                stack[-1] = (chain, i + 1)
                target, line = edges[i]
                if target in on_path:
                    path = [c for c, _ in stack] + [target]
                    return f"jump loop {' -> '.join(path[path.index(target):])} (the kernel refuses it: ELOOP)", line
                if target not in depth:
                    on_path.add(target)
                    stack.append((target, 0))
                continue
            stack.pop()
            on_path.discard(chain)
            depth[chain] = 1 + max((depth.get(t, 0) for t, _ in edges), default=-1)
            if depth[chain] > max_depth:
                line = edges[0][1] if edges else 0
                return f"chain {chain} nests jumps {depth[chain]} deep; {walker} at most {max_depth}", line
    return None
