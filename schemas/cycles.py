"""Cycles in a small directed graph (budget parents, run `after` links), each named by one concrete loop.

Pure graph code: knows nothing of budgets or runs, and never recurses (deep families are fine).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def cyclic_edges(graph: Mapping[str, Iterable[str]]) -> dict[tuple[str, str], list[str]]:
    """Every edge that lies on a cycle, with one concrete cycle through it (u -> v -> ... -> u)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    component: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    succ = {u: sorted(vs) for u, vs in graph.items()}
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:  # iterative Tarjan: deep families never hit the recursion limit
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            nexts = succ.get(node, [])
            if i < len(nexts):
                work.append((node, i + 1))
                nxt = nexts[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = index[node]
                    if member == node:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    out: dict[tuple[str, str], list[str]] = {}
    for u, vs in succ.items():
        for v in vs:
            if component.get(v) == component[u]:
                out[(u, v)] = [u, *_path(succ, v, u, component)]
    return out


def _path(succ: Mapping[str, list[str]], start: str, goal: str, component: Mapping[str, int]) -> list[str]:
    """Shortest path start -> goal inside one strongly connected component (inclusive)."""
    prev: dict[str, str | None] = {start: None}
    queue = [start]
    for node in queue:
        if node == goal:
            break
        for nxt in succ.get(node, []):
            if nxt not in prev and component.get(nxt) == component[start]:
                prev[nxt] = node
                queue.append(nxt)
    path: list[str] = []
    cur: str | None = goal
    while cur is not None:
        path.append(cur)
        cur = prev.get(cur)
    return path[::-1]
