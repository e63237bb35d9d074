"""Code generator: Kafka's JSON message definitions -> straight-line Python codecs.

Run ``python -m protocol.generator [--spec-dir DIR] [--out DIR]``. It reads every JSON file in
``message/``, ``metadata/`` and ``coordinator/`` of the spec dir (Apache Kafka's own protocol
definitions, not part of this repository) and writes one module per definition into
``protocol/_generated/`` plus an index (``_generated/__init__.py``) that maps API keys, metadata
record types and coordinator record types to (module, class) without importing them, so a
broker only pays for the modules it uses.

For every struct and every version it emits one reader and one writer function of straight-line
code: consecutive fixed-width fields are read and written with a single precompiled
``struct.Struct``; versions whose code would be identical share one function. Field names are the
snake_case of Kafka's names. Tagged fields are decoded by tag; unknown tags are kept on the
struct (``unknown_tags``) and written back, so they survive a round trip.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_VERSION = 0x7FFF

FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
PY_TYPE = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "float64": "float",
    "bool": "bool",
    "uuid": "uuid.UUID",
    "string": "str",
    "bytes": "bytes",
    "records": "Any",
}
PRIMITIVES = set(PY_TYPE)


# --------------------------------------------------------------------------------------------
# model


@dataclass(frozen=True)
class VRange:
    lo: int
    hi: int  # inclusive; -1 lo means empty

    @staticmethod
    def parse(s: str | None, cap: int = MAX_VERSION) -> VRange:
        if s is None or s == "none":
            return VRange(-1, -2)
        s = s.strip()
        if s.endswith("+"):
            return VRange(int(s[:-1]), cap)
        if "-" in s:
            a, b = s.split("-")
            return VRange(int(a), int(b))
        return VRange(int(s), int(s))

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi and self.lo >= 0

    @property
    def empty(self) -> bool:
        return self.lo < 0 or self.hi < self.lo


@dataclass
class Field:
    name: str
    attr: str
    type: str  # element type for arrays
    is_array: bool
    versions: VRange
    nullable: VRange
    tagged: VRange
    tag: int | None
    default: object
    struct: StructDef | None
    flex_override_none: bool  # field-level flexibleVersions "none"


@dataclass
class StructDef:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Spec:
    path: Path
    kind: str  # message dir name
    name: str
    type: str
    api_key: int | None
    valid: VRange
    flexible: VRange
    listeners: list[str]
    latest_unstable: bool
    root: StructDef
    structs: dict[str, StructDef]  # all nested struct defs by name, in definition order


def strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        in_str = False
        esc = False
        cut = len(line)
        for i, ch in enumerate(line):
            if esc:
                esc = False
                continue
            if ch == "\\":
                esc = True
            elif ch == '"':
                in_str = not in_str
            elif not in_str and line.startswith("//", i):
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    s = s.lower()
    if keyword.iskeyword(s) or s in ("unknown_tags", "fields", "version"):
        s += "_"
    return s


def parse_default(ftype: str, is_array: bool, raw: object, nullable: VRange) -> object:
    if is_array:
        return None if raw == "null" else []
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        if raw is None or raw == "":
            return 0
        if isinstance(raw, int):
            return raw
        assert isinstance(raw, str)
        return int(raw, 16) if raw.lower().startswith(("0x", "-0x")) else int(raw)
    if ftype == "float64":
        return float(str(raw)) if raw not in (None, "") else 0.0
    if ftype == "bool":
        return raw in (True, "true")
    if ftype == "string":
        if raw == "null":
            return None
        return raw if isinstance(raw, str) else ""
    if ftype in ("bytes", "records"):
        if raw == "null" or (raw is None and ftype == "records" and not nullable.empty):
            return None
        return b""
    if ftype == "uuid":
        return "ZERO_UUID"
    # struct
    return None if raw == "null" else "STRUCT"


def load_spec(path: Path, kind: str) -> Spec | None:
    data = json.loads(strip_comments(path.read_text()))
    valid = VRange.parse(data.get("validVersions"))
    if valid.empty:
        return None
    cap = valid.hi
    common = {c["name"]: c for c in data.get("commonStructs", [])}
    loader = _StructLoader(path, valid, common)
    # common structs referenced before use are resolved lazily in field()
    root = StructDef(str(data["name"]))
    for fj in data["fields"]:
        root.fields.append(loader.field(fj))
    for cname, c in common.items():
        if cname not in loader.structs:
            loader.struct(cname, c["fields"])
    return Spec(
        path=path,
        kind=kind,
        name=str(data["name"]),
        type=str(data["type"]),
        api_key=data.get("apiKey"),
        valid=valid,
        flexible=VRange.parse(data.get("flexibleVersions"), cap),
        listeners=list(data.get("listeners", [])),
        latest_unstable=bool(data.get("latestVersionUnstable", False)),
        root=root,
        structs=loader.structs,
    )


class _StructLoader:
    """The fields and structs of one spec file, structs built at their first use."""

    def __init__(self, path: Path, valid: VRange, common: dict[str, Any]) -> None:
        self.path = path
        self.valid = valid
        self.cap = valid.hi
        self.common = common
        self.structs: dict[str, StructDef] = {}

    def struct(self, name: str, fields_json: list[dict[str, object]]) -> StructDef:
        sd = StructDef(name)
        for fj in fields_json:
            sd.fields.append(self.field(fj))
        self.structs[name] = sd
        return sd

    def field(self, fj: dict[str, object]) -> Field:
        cap, valid = self.cap, self.valid
        t = str(fj["type"])
        is_array = t.startswith("[]")
        et = t[2:] if is_array else t
        # a tagged-only field without "versions" exists in its tagged versions only (Kafka's
        # FieldSpec): e.g. TransactionLogValue's PreviousProducerId is absent from v0
        versions = VRange.parse(str(fj.get("versions", fj.get("taggedVersions", "0+"))), cap)
        versions = VRange(max(versions.lo, valid.lo), min(versions.hi, cap))
        nullable = VRange.parse(fj.get("nullableVersions"), cap)  # type: ignore[arg-type]
        tagged = VRange.parse(fj.get("taggedVersions"), cap)  # type: ignore[arg-type]
        sd: StructDef | None = None
        if et not in PRIMITIVES:
            if "fields" in fj:
                sd = self.struct(et, fj["fields"])  # type: ignore[arg-type]
            elif et in self.structs:
                sd = self.structs[et]
            elif et in self.common:
                sd = self.struct(et, self.common[et]["fields"])
            else:
                raise SystemExit(f"{self.path}: unknown type {et}")
        flex = fj.get("flexibleVersions")
        return Field(
            name=str(fj["name"]),
            attr=snake(str(fj["name"])),
            type=et,
            is_array=is_array,
            versions=versions,
            nullable=nullable,
            tagged=tagged,
            tag=int(fj["tag"]) if "tag" in fj else None,  # type: ignore[call-overload]
            default=parse_default(et, is_array, fj.get("default"), nullable),
            struct=sd,
            flex_override_none=(flex == "none"),
        )


# --------------------------------------------------------------------------------------------
# emitter


class Emitter:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.funcs: dict[str, str] = {}  # body hash -> function name
        self.func_src: list[str] = []
        self.structs_fmt: dict[str, str] = {}
        self.memo: dict[tuple[str, str, int], str] = {}
        self.counter = 0

    def cls_ref(self, sd: StructDef) -> str:
        if sd is self.spec.root:
            return self.spec.name
        return f"{self.spec.name}.{sd.name}"

    def sfmt(self, fmt: str) -> str:
        if fmt not in self.structs_fmt:
            self.structs_fmt[fmt] = f"_S{len(self.structs_fmt)}"
        return self.structs_fmt[fmt]

    def add_func(self, kind: str, sd: StructDef, body: list[str], sig: str) -> str:
        text = "\n".join(body)
        key = hashlib.sha1((kind + sd.name + sig + text).encode()).hexdigest()
        if key in self.funcs:
            return self.funcs[key]
        self.counter += 1
        fname = f"_{kind}_{sd.name}_{self.counter}"
        self.funcs[key] = fname
        self.func_src.append(f"def {fname}{sig}\n" + text + "\n")
        return fname

    # ---- reading ----------------------------------------------------------------------------
    def read_expr(self, f: Field, v: int, flex: bool, r: str = "r") -> str:
        """Expression reading one non-fixed (or any) field value."""
        nullable = v in f.nullable
        cflex = flex and not f.flex_override_none
        if f.is_array:
            n = "n"
            elem = self.read_elem(f, v, flex, r)
            lenf = ("ncarray_len" if nullable else "carray_len") if cflex else (
                "narray_len" if nullable else "array_len")
            if nullable:
                return f"(None if ({n} := {r}.{lenf}()) < 0 else [{elem} for _ in range({n})])"
            return f"[{elem} for _ in range({r}.{lenf}())]"
        return self.read_elem(f, v, flex, r, single=True)

    def read_elem(self, f: Field, v: int, flex: bool, r: str, single: bool = False) -> str:
        t = f.type
        nullable = single and v in f.nullable
        cflex = flex and not f.flex_override_none
        if t in FIXED:
            if t == "int8":
                return f"{r}.int8()"
            if t == "uuid":
                return f"{r}.uuid()"
            fmt = FIXED[t][0]
            return f"{r}.unpack({self.sfmt('>' + fmt)})[0]"
        if t == "string":
            return f"{r}.{'n' if nullable else ''}{'c' if cflex else ''}string()"
        if t == "bytes":
            if cflex:
                return f"{r}.{'nc' if nullable else 'c'}bytes()"
            return f"{r}.{'nbytes' if nullable else 'bytes_'}()"
        if t == "records":
            return f"{r}.{'crecords' if cflex else 'records'}()"
        assert f.struct is not None
        fn = self.reader(f.struct, v, flex)
        if nullable:
            return f"(None if {r}.int8() < 0 else {fn}({r}))"
        return f"{fn}({r})"

    def reader(self, sd: StructDef, v: int, flex: bool) -> str:
        key = ("r", sd.name, v)
        if key in self.memo:
            return self.memo[key]
        body = [f"    o = {self.cls_ref(sd)}()"]
        fields = [f for f in sd.fields if v in f.versions and not (flex and v in f.tagged)]
        i = 0
        while i < len(fields):
            f = fields[i]
            if self.is_fixed(f):
                group = [f]
                j = i + 1
                while j < len(fields) and self.is_fixed(fields[j]):
                    group.append(fields[j])
                    j += 1
                if len(group) == 1 and f.type in ("int8", "uuid"):
                    body.append(f"    o.{f.attr} = {self.read_elem(f, v, flex, 'r')}")
                else:
                    fmt = ">" + "".join(FIXED[g.type][0] for g in group)
                    if any(g.type == "uuid" for g in group):
                        names = [f"x{k}" for k in range(len(group))]
                        body.append(f"    ({', '.join(names)},) = r.unpack({self.sfmt(fmt)})")
                        for g, nm in zip(group, names, strict=True):
                            conv = f"uuid.UUID(bytes={nm})" if g.type == "uuid" else nm
                            body.append(f"    o.{g.attr} = {conv}")
                    else:
                        targets = ", ".join(f"o.{g.attr}" for g in group)
                        body.append(f"    ({targets},) = r.unpack({self.sfmt(fmt)})")
                i = j
                continue
            body.append(f"    o.{f.attr} = {self.read_expr(f, v, flex)}")
            i += 1
        if flex:
            tagged = sorted(
                (f for f in sd.fields if v in f.versions and v in f.tagged),
                key=lambda f: f.tag or 0,
            )
            body.append("    for _ in range(r.uvarint()):")
            body.append("        tag, size = r.tag_header()")
            kw = "if"
            for f in tagged:
                body.append(f"        {kw} tag == {f.tag}:")
                body.append("            s = r.sub(size)")
                body.append(f"            o.{f.attr} = {self.read_expr(f, v, True, 's')}")
                kw = "elif"
            if tagged:
                body.append("        else:")
                body.append("            o.read_unknown_tag(r, tag, size)")
            else:
                body.append("        o.read_unknown_tag(r, tag, size)")
        body.append("    return o")
        name = self.add_func("r", sd, body, f"(r: Reader) -> {self.cls_ref(sd)}:")
        self.memo[key] = name
        return name

    @staticmethod
    def is_fixed(f: Field) -> bool:
        return f.type in FIXED and not f.is_array

    # ---- writing ----------------------------------------------------------------------------
    def write_stmts(self, f: Field, v: int, flex: bool, val: str, w: str, ind: str) -> list[str]:
        nullable = v in f.nullable
        cflex = flex and not f.flex_override_none
        if f.is_array:
            out = []
            lenf = "carray_len" if cflex else "array_len"
            if nullable:
                lenf = "n" + lenf
            out.append(f"{ind}{w}.{lenf}({val})")
            if not f.nullable.empty:
                out.append(f"{ind}if {val} is not None:")
                ind2 = ind + "    "
            else:
                ind2 = ind
            ev = f"e_{f.attr}"
            out.append(f"{ind2}for {ev} in {val}:")
            out += self.write_elem(f, v, flex, ev, w, ind2 + "    ", single=False)
            return out
        return self.write_elem(f, v, flex, val, w, ind, single=True)

    def write_elem(
        self, f: Field, v: int, flex: bool, val: str, w: str, ind: str, single: bool
    ) -> list[str]:
        t = f.type
        nullable = single and v in f.nullable
        cflex = flex and not f.flex_override_none
        if t in FIXED:
            if t == "uuid":
                return [f"{ind}{w} += {val}.bytes"]
            fmt = FIXED[t][0]
            return [f"{ind}{w} += {self.sfmt('>' + fmt)}.pack({val})"]
        if t == "string":
            return [f"{ind}{w}.{'n' if nullable else ''}{'c' if cflex else ''}string({val})"]
        if t == "bytes":
            if cflex:
                return [f"{ind}{w}.{'nc' if nullable else 'c'}bytes({val})"]
            return [f"{ind}{w}.{'nbytes' if nullable else 'bytes_'}({val})"]
        if t == "records":
            return [f"{ind}{w}.{'crecords' if cflex else 'records'}({val})"]
        assert f.struct is not None
        fn = self.writer(f.struct, v, flex)
        if nullable:
            return [
                f"{ind}if {val} is None:",
                f"{ind}    {w} += b'\\xff'",
                f"{ind}else:",
                f"{ind}    {w} += b'\\x01'",
                f"{ind}    {fn}({w}, {val})",
            ]
        return [f"{ind}{fn}({w}, {val})"]

    def default_check(self, f: Field, val: str) -> str:
        """Condition under which a tagged field differs from its default and must be written."""
        d = f.default
        if f.is_array:
            if d == []:
                return f"{val} is None or len({val}) > 0"
            return f"{val} is not None"
        if f.struct is not None:
            if d is None:
                return f"{val} is not None"
            return f"{val} != {self.cls_ref(f.struct)}()"
        if d == "ZERO_UUID":
            return f"{val} != ZERO_UUID"
        return f"{val} != {d!r}"

    def writer(self, sd: StructDef, v: int, flex: bool) -> str:
        key = ("w", sd.name, v)
        if key in self.memo:
            return self.memo[key]
        body: list[str] = []
        fields = [f for f in sd.fields if v in f.versions and not (flex and v in f.tagged)]
        i = 0
        while i < len(fields):
            f = fields[i]
            if self.is_fixed(f) and f.type != "uuid":
                group = [f]
                j = i + 1
                while j < len(fields) and self.is_fixed(fields[j]) and fields[j].type != "uuid":
                    group.append(fields[j])
                    j += 1
                fmt = ">" + "".join(FIXED[g.type][0] for g in group)
                args = ", ".join(f"o.{g.attr}" for g in group)
                body.append(f"    w += {self.sfmt(fmt)}.pack({args})")
                i = j
                continue
            body += self.write_stmts(f, v, flex, f"o.{f.attr}", "w", "    ")
            i += 1
        if flex:
            tagged = sorted(
                (f for f in sd.fields if v in f.versions and v in f.tagged),
                key=lambda f: f.tag or 0,
            )
            if not tagged:
                body.append("    if o.unknown_tags:")
                body.append("        write_tags(w, [], o.unknown_tags)")
                body.append("    else:")
                body.append("        w.append(0)")
            else:
                body.append("    tags: list[tuple[int, bytes | bytearray]] = []")
                for f in tagged:
                    body.append(f"    if {self.default_check(f, 'o.' + f.attr)}:")
                    body.append("        t = Writer()")
                    body += self.write_stmts(f, v, True, f"o.{f.attr}", "t", "        ")
                    body.append(f"        tags.append(({f.tag}, t))")
                body.append("    write_tags(w, tags, o.unknown_tags)")
        if not body:
            body.append("    pass")
        name = self.add_func("w", sd, body, f"(w: Writer, o: {self.cls_ref(sd)}) -> None:")
        self.memo[key] = name
        return name

    # ---- classes ----------------------------------------------------------------------------
    def py_type(self, f: Field) -> str:
        if f.struct is not None:
            base = self.cls_ref(f.struct)
        else:
            base = PY_TYPE[f.type]
        if f.is_array:
            t = f"list[{base}]"
            return t + " | None" if not f.nullable.empty else t
        if f.type == "records":
            return "Any"
        if not f.nullable.empty:
            return base + " | None"
        return base

    def class_src(self, sd: StructDef, indent: str, is_root: bool) -> list[str]:
        out = [f"{indent}class {sd.name}(Struct):"]
        ind = indent + "    "
        attrs = [f.attr for f in sd.fields]
        out.append(f"{ind}__slots__ = ({''.join(repr(a) + ', ' for a in attrs)})")
        if is_root:
            s = self.spec
            out.append(f"{ind}NAME: ClassVar[str] = {s.name!r}")
            out.append(f"{ind}API_KEY: ClassVar[int] = {s.api_key if s.api_key is not None else -1}")
            out.append(f"{ind}MIN_VERSION: ClassVar[int] = {s.valid.lo}")
            out.append(f"{ind}MAX_VERSION: ClassVar[int] = {s.valid.hi}")
            fl = s.flexible.lo if not s.flexible.empty else -1
            out.append(f"{ind}FLEXIBLE_FROM: ClassVar[int] = {fl}")
        out += self.fields_src(sd, ind)
        # nested struct classes, at root only (flat namespace per definition)
        if is_root:
            for sub in self.spec.structs.values():
                out += self.class_src(sub, ind, False)
        for f in sd.fields:
            out.append(f"{ind}{f.attr}: {self.py_type(f)}")
        out += self.init_src(sd, ind)
        if is_root:
            out += self.root_methods_src(ind)
        out.append("")
        return out

    def fields_src(self, sd: StructDef, ind: str) -> list[str]:
        """FIELDS: (attr, type, is_array, vlo, vhi, nlo, nhi, tlo, thi, tag, struct, flex_none)"""
        out = [f"{ind}FIELDS: ClassVar[tuple[tuple[Any, ...], ...]] = ("]
        for f in sd.fields:
            sp = (
                f.attr, f.type, f.is_array, f.versions.lo, f.versions.hi,
                f.nullable.lo, f.nullable.hi, f.tagged.lo, f.tagged.hi,
                -1 if f.tag is None else f.tag,
                f.struct.name if f.struct is not None else "",
                f.flex_override_none,
            )
            out.append(f"{ind}    {sp!r},")
        out.append(f"{ind})")
        return out

    def init_src(self, sd: StructDef, ind: str) -> list[str]:
        params = []
        assigns = []
        for f in sd.fields:
            t = self.py_type(f)
            d = f.default
            if (f.is_array or f.struct is not None) and d is None:
                params.append(f"{f.attr}: {t} = None")
                assigns.append(f"self.{f.attr} = {f.attr}")
            elif f.is_array or f.struct is not None:
                base = t.removesuffix(" | None")
                params.append(f"{f.attr}: {base} | None = None")
                empty = "[]" if f.is_array else f"{self.cls_ref(f.struct)}()"  # type: ignore[arg-type]
                assigns.append(f"self.{f.attr} = {empty} if {f.attr} is None else {f.attr}")
            else:
                dv = "ZERO_UUID" if d == "ZERO_UUID" else repr(d)
                params.append(f"{f.attr}: {t} = {dv}")
                assigns.append(f"self.{f.attr} = {f.attr}")
        sig = ", ".join(["self", "*"] + params) if params else "self"
        out = [f"{ind}def __init__({sig}) -> None:"]
        for a in assigns:
            out.append(f"{ind}    {a}")
        out.append(f"{ind}    self.unknown_tags = None")
        return out

    def root_methods_src(self, ind: str) -> list[str]:
        n = self.spec.name
        lines = [
            "",
            "@classmethod",
            f"def read(cls, r: Reader, version: int) -> {n}:",
            "    try:",
            "        fn = _READERS[version]",
            "    except KeyError:",
            f"        raise RemoteProtocolError(f'{n} v{{version}} is not supported') from None",
            "    return fn(r)",
            "",
            "@classmethod",
            f"def decode(cls, buf: bytes | bytearray | memoryview, version: int) -> {n}:",
            "    return cls.read(Reader(buf), version)",
            "",
            "def write(self, w: Writer, version: int) -> None:",
            "    _WRITERS[version](w, self)",
            "",
            "def encode(self, version: int) -> bytes:",
            "    w = Writer()",
            "    _WRITERS[version](w, self)",
            "    return bytes(w)",
        ]
        return [f"{ind}{line}" if line else "" for line in lines]

    def module(self) -> str:
        s = self.spec
        readers = {}
        writers = {}
        for v in range(s.valid.lo, s.valid.hi + 1):
            flex = v in s.flexible
            readers[v] = self.reader(s.root, v, flex)
            writers[v] = self.writer(s.root, v, flex)
        rel = f"{s.path.parent.name}/{s.path.name}"
        lines = [
            f"# AUTOGENERATED by protocol/generator.py from Apache Kafka's {rel}. DO NOT EDIT.",
            "# ruff: noqa",
            "from __future__ import annotations",
            "",
            "import struct",
            "import uuid",
            "from typing import Any, Callable, ClassVar",
            "",
            "from protocol.primitives import (",
            "    ZERO_UUID, Reader, RemoteProtocolError, Struct, Writer, write_tags,",
            ")",
            "",
        ]
        for fmt, name in self.structs_fmt.items():
            lines.append(f"{name} = struct.Struct({fmt!r})")
        lines.append("")
        lines.append("")
        lines += self.class_src(s.root, "", True)
        lines.append("")
        lines += self.func_src
        n = s.name
        lines.append(
            f"_READERS: dict[int, Callable[[Reader], {n}]] = {{"
            + ", ".join(f"{v}: {fn}" for v, fn in readers.items())
            + "}"
        )
        lines.append(
            f"_WRITERS: dict[int, Callable[[Writer, {n}], None]] = {{"
            + ", ".join(f"{v}: {fn}" for v, fn in writers.items())
            + "}"
        )
        return "\n".join(lines) + "\n"


def module_name(spec: Spec) -> str:
    return snake(spec.name).rstrip("_")


class _Index:
    """What the generated package's ``__init__`` lists: (module, class) by key and by name."""

    TABLES = ("REQUESTS", "RESPONSES", "METADATA_RECORDS", "COORDINATOR_KEYS", "COORDINATOR_VALUES")
    #: spec type -> table
    BY_TYPE = {"request": "REQUESTS", "response": "RESPONSES", "metadata": "METADATA_RECORDS",
               "coordinator-key": "COORDINATOR_KEYS", "coordinator-value": "COORDINATOR_VALUES"}

    def __init__(self) -> None:
        self.tables: dict[str, dict[int, tuple[str, str]]] = {t: {} for t in self.TABLES}
        self.api_info: dict[int, tuple[object, ...]] = {}
        self.by_name: dict[str, tuple[str, str]] = {}

    def add(self, spec: Spec, mod: str) -> None:
        ref = (mod, spec.name)
        self.by_name[spec.name] = ref
        table = self.BY_TYPE.get(spec.type)
        if table is None:
            return
        assert spec.api_key is not None
        self.tables[table][spec.api_key] = ref
        if spec.type == "request":
            self.api_info[spec.api_key] = (
                spec.name.removesuffix("Request"),
                spec.valid.lo,
                spec.valid.hi,
                spec.flexible.lo if not spec.flexible.empty else -1,
                tuple(spec.listeners),
                spec.latest_unstable,
            )

    def module(self) -> str:
        idx = [
            "# AUTOGENERATED by protocol/generator.py. DO NOT EDIT.",
            '"""Index of generated codecs: (module, class) by API key / record type / name."""',
            "",
            "from __future__ import annotations",
            "",
            "# api key -> (name, min version, max version, first flexible version or -1,",
            "#             listeners, latest version unstable)",
            "API_INFO: dict[int, tuple[str, int, int, int, tuple[str, ...], bool]] = {",
        ]
        for k in sorted(self.api_info):
            idx.append(f"    {k}: {self.api_info[k]!r},")
        idx.append("}")
        for title in self.TABLES:
            table = self.tables[title]
            idx.append(f"{title}: dict[int, tuple[str, str]] = {{")
            for k in sorted(table):
                idx.append(f"    {k}: {table[k]!r},")
            idx.append("}")
        idx.append("BY_NAME: dict[str, tuple[str, str]] = {")
        for name in sorted(self.by_name):
            idx.append(f"    {name!r}: {self.by_name[name]!r},")
        idx.append("}")
        return "\n".join(idx) + "\n"


def generate(spec_dir: Path, out: Path | None) -> dict[str, str]:
    files: dict[str, str] = {}
    index = _Index()
    for kind in ("message", "metadata", "coordinator"):
        d = spec_dir / kind
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.json")):
            spec = load_spec(path, kind)
            if spec is None:
                continue
            mod = module_name(spec)
            files[f"{mod}.py"] = Emitter(spec).module()
            index.add(spec, mod)
    files["__init__.py"] = index.module()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.py"):
            if old.name not in files:
                old.unlink()
        for name, text in files.items():
            p = out / name
            if not p.exists() or p.read_text() != text:
                p.write_text(text)
    return files


def default_spec_dir() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "shared" / "kafka-protocol"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--spec-dir", type=Path, default=default_spec_dir())
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "_generated")
    a = ap.parse_args(argv)
    if not (a.spec_dir / "message").is_dir():
        print(f"spec dir {a.spec_dir} has no message/ folder", file=sys.stderr)
        return 2
    files = generate(a.spec_dir, a.out)
    print(f"wrote {len(files)} modules to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
