"""Hypothesis strategies that build random instances of generated messages for one version."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

from hypothesis import strategies as st

from protocol._generated import BY_NAME
from protocol.primitives import Struct

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def message_class(name: str) -> type[Struct]:
    mod, cls = BY_NAME[name]
    return getattr(importlib.import_module(f"protocol._generated.{mod}"), cls)  # type: ignore[no-any-return]


def _prim(t: str) -> st.SearchStrategy[Any]:
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "string":
        return st.text(max_size=12)
    if t in ("bytes", "records"):
        return st.binary(max_size=24)
    if t == "uuid":
        return st.builds(lambda b: uuid.UUID(bytes=b), st.binary(min_size=16, max_size=16))
    raise AssertionError(t)


def instance(root: type[Struct], cls: type[Struct], version: int, depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for ``cls`` (root or one of root's nested structs) valid at ``version``."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for attr, ftype, is_array, vlo, vhi, nlo, nhi, _tlo, _thi, _tag, sname, _fx in cls.FIELDS:
        if not vlo <= version <= vhi:
            continue
        if sname:
            sub = getattr(root, sname)
            elem = instance(root, sub, version, depth + 1) if depth < 4 else st.just(sub())
        else:
            elem = _prim(ftype)
        if is_array:
            s: st.SearchStrategy[Any] = st.lists(elem, max_size=3 if depth < 2 else 1)
        else:
            s = elem
        if 0 <= nlo <= version <= nhi:
            s = st.one_of(st.none(), s)
        parts[attr] = s

    def build(values: dict[str, Any]) -> Struct:
        o = cls()
        for k, v in values.items():
            setattr(o, k, v)
        return o

    return st.fixed_dictionaries(parts).map(build)
