"""Flatten nested tuple/list/dict outputs into leaves and rebuild them.

Leaves that ``is_leaf`` rejects (Python ints, strings, None...) are static:
they live in the tree definition and come back unchanged.
"""

from __future__ import annotations

from typing import Any, Callable


class TreeDef:
    __slots__ = ("kind", "children", "meta")

    def __init__(self, kind: str, children=(), meta=None):
        self.kind, self.children, self.meta = kind, tuple(children), meta

    def unflatten(self, leaves) -> Any:
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        if self.kind == "leaf":
            return next(it)
        if self.kind == "static":
            return self.meta
        items = [c._build(it) for c in self.children]
        if self.kind == "tuple":
            return tuple(items)
        if self.kind == "list":
            return items
        return dict(zip(self.meta, items))

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __repr__(self):
        if self.kind in ("leaf", "static"):
            return "*" if self.kind == "leaf" else repr(self.meta)
        inner = ", ".join(map(repr, self.children))
        return {"tuple": f"({inner})", "list": f"[{inner}]"}.get(self.kind, f"{{{inner}}}")


def flatten(obj: Any, is_leaf: Callable[[Any], bool]) -> tuple[list, TreeDef]:
    leaves: list = []

    def walk(o):
        if isinstance(o, tuple) and not hasattr(o, "_fields"):
            return TreeDef("tuple", [walk(x) for x in o])
        if isinstance(o, list):
            return TreeDef("list", [walk(x) for x in o])
        if isinstance(o, dict):
            keys = list(o.keys())
            return TreeDef("dict", [walk(o[k]) for k in keys], keys)
        if is_leaf(o):
            leaves.append(o)
            return TreeDef("leaf")
        return TreeDef("static", meta=o)

    tree = walk(obj)
    return leaves, tree
