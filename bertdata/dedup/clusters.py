"""Matched documents joined into clusters (the connected components of the matches), and the one
document each cluster keeps.

The rule: a cluster keeps the document with the smallest key, (corpus rank in the recipe,
document id): the corpus the recipe names first, then the smallest id. It depends on the
documents alone, never on the runner, the workers or the order files were read in.
"""

from __future__ import annotations

import numpy as np


def components(pairs: np.ndarray) -> dict[int, list[int]]:
    """The clusters of `pairs` ((ref, ref) rows): root -> its members (refs, sorted)."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in np.unique(pairs, axis=0).tolist() if len(pairs) else ():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    clusters: dict[int, list[int]] = {}
    for ref in sorted(parent):
        clusters.setdefault(find(ref), []).append(ref)
    for root, members in clusters.items():
        if root not in members:
            members.insert(0, root)
    return clusters
