"""Flatten nested tuple/list/dict/namedtuple outputs into leaves and rebuild them.

Leaves that ``is_leaf`` rejects (Python ints, strings, None...) are static:
they live in the tree definition and come back unchanged. Another object
holding a value that ``must_rebuild`` flags (a dataclass of traced arrays)
cannot be rebuilt around new leaves: ``flatten`` raises ``TypeError``.
"""

from __future__ import annotations

import types
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
        if self.kind == "namedtuple":
            return self.meta(*items)
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
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        return {"tuple": f"({inner})", "list": f"[{inner}]"}.get(self.kind, f"{{{inner}}}")


def flatten(obj: Any, is_leaf: Callable[[Any], bool],
            must_rebuild: Callable[[Any], bool] | None = None) -> tuple[list, TreeDef]:
    leaves: list = []

    def walk(o):
        if isinstance(o, tuple):
            if hasattr(type(o), "_fields"):  # a namedtuple: rebuilt as its own class
                return TreeDef("namedtuple", [walk(x) for x in o], type(o))
            return TreeDef("tuple", [walk(x) for x in o])
        if isinstance(o, list):
            return TreeDef("list", [walk(x) for x in o])
        if isinstance(o, dict):
            keys = list(o.keys())
            return TreeDef("dict", [walk(o[k]) for k in keys], keys)
        if is_leaf(o):
            leaves.append(o)
            return TreeDef("leaf")
        if must_rebuild is not None and isinstance(o, types.GeneratorType):
            raise TypeError("an output is a generator, which would yield traced arrays after "
                            "the trace; return a tuple or list (tuple(gen)).")
        if must_rebuild is not None and _holds(o, must_rebuild):
            raise TypeError(
                f"an output is a {type(o).__name__} object holding traced arrays; return them in a "
                "tuple, list, dict or namedtuple (those are rebuilt around the results).")
        return TreeDef("static", meta=o)

    tree = walk(obj)
    return leaves, tree


def _holds(o, pred) -> bool:
    """Whether one of ``o``'s attributes (its __dict__ or __slots__, or their
    tuple, list or dict items) satisfies ``pred``."""
    attrs = list(getattr(o, "__dict__", {}).values()) if not isinstance(o, type) else []
    for name in getattr(type(o), "__slots__", ()):
        if isinstance(name, str) and hasattr(o, name):
            attrs.append(getattr(o, name))
    for v in attrs:
        items = v.values() if isinstance(v, dict) else v if isinstance(v, (tuple, list)) else (v,)
        if any(pred(e) for e in items):
            return True
    return False
