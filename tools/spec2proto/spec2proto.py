#!/usr/bin/env python3
"""Bootstrap the Snowpea proto schema from the plain-text protocol spec.

Reads docs like /work/shared/spec/snowpea-protocol-1.25.0.md (Method index, per-method
Params/Result tables, Notifications, session.event kinds, Error codes) and writes proto3
files under proto/snowpea/<pkg>/v1/. After the bootstrap the .proto files are the
hand-maintained source of truth; this script is kept for reference only.

Usage:
    python tools/spec2proto/spec2proto.py --spec SPEC [--out proto]   # generate
    python tools/spec2proto/spec2proto.py --spec SPEC --check          # verify coverage

Stdlib only (Python 3.11).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from dataclasses import dataclass, field as dc_field

DEFAULT_SPEC = "/work/shared/spec/snowpea-protocol-1.25.0.md"
OPT = "snowpea.rpc.v1"
WIDTH = 100

# --------------------------------------------------------------------------------------
# Spec parsing
# --------------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    type: str
    required: bool
    desc: str


@dataclass
class Method:
    name: str
    direction: str  # raw spec text
    desc: str
    params: list[Row] | None  # None = "No params"
    result: list[Row] | None


@dataclass
class Spec:
    version: str
    capabilities: list[str]
    index: list[tuple[str, str, str]]
    methods: dict[str, Method]
    notifications: dict[str, list[Row]]
    events: dict[str, list[Row]]
    error_codes: list[tuple[str, str]]
    warnings: list[str] = dc_field(default_factory=list)


def _row(line: str, warnings: list[str], where: str) -> Row:
    parts = line.split("\t")
    if len(parts) < 3:
        raise ValueError(f"{where}: bad table row {line!r}")
    if len(parts) == 3 and not (where.startswith("event ") and parts[0] == "kind"):
        warnings.append(f"{where}: row `{parts[0]}` has no description column")
    desc = "\t".join(parts[3:]).strip() if len(parts) > 3 else ""
    req = parts[2].strip()
    if req not in ("yes", "no"):
        raise ValueError(f"{where}: bad required column {req!r}")
    return Row(parts[0].strip(), parts[1].strip(), req == "yes", desc)


def _table(lines: list[str], i: int, warnings: list[str], where: str) -> tuple[list[Row], int]:
    """lines[i] is the header row `field\ttype\trequired\tdescription`."""
    assert lines[i].startswith("field\ttype"), (where, lines[i])
    rows = []
    i += 1
    while i < len(lines) and "\t" in lines[i]:
        rows.append(_row(lines[i], warnings, where))
        i += 1
    return rows, i


def parse_spec(path: str) -> Spec:
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    warnings: list[str] = []
    m = re.search(r"Protocol version: (\d+\.\d+\.\d+)", text)
    version = m.group(1) if m else "?"

    def find(line: str, start: int = 0) -> int:
        for k in range(start, len(lines)):
            if lines[k].strip() == line:
                return k
        raise ValueError(f"section {line!r} not found")

    # capabilities
    caps = []
    k = next(k for k, l in enumerate(lines) if l.startswith("Server capabilities advertised"))
    k += 1
    while k < len(lines) and not lines[k].startswith("Method index"):
        l = lines[k].strip()
        if l.startswith("•"):
            caps.append(l.lstrip("•").strip())
        k += 1

    # method index
    i_index = find("Method index")
    i_methods = find("Methods", i_index)
    i_notes = find("Notifications", i_methods)
    i_events = find("session.event kinds", i_notes)
    i_errors = find("Error codes", i_events)
    index = []
    for l in lines[i_index + 1 : i_methods]:
        if "\t" in l and not l.startswith("method\t"):
            name, direction, summary = l.split("\t", 2)
            index.append((name.strip(), direction.strip(), summary.strip()))
    names = {n for n, _, _ in index}

    # methods
    methods: dict[str, Method] = {}
    body = lines[i_methods + 1 : i_notes]
    starts = [k for k, l in enumerate(body) if l.strip() in names and
              k + 2 < len(body) and body[k + 2].startswith("Direction:")]
    for s_idx, s in enumerate(starts):
        end = starts[s_idx + 1] if s_idx + 1 < len(starts) else len(body)
        blk = body[s:end]
        name = blk[0].strip()
        direction = blk[2].split(":", 1)[1].strip()
        j = 3
        desc_lines = []
        while j < len(blk) and blk[j].strip() != "Params":
            if blk[j].strip():
                desc_lines.append(blk[j].strip())
            j += 1
        desc = " ".join(desc_lines)
        params = result = None
        section = None
        while j < len(blk):
            l = blk[j]
            if l.strip() in ("Params", "Result"):
                section = l.strip()
                j += 1
                continue
            if l.startswith("field\ttype"):
                rows, j = _table(blk, j, warnings, f"{name} {section}")
                if section == "Params":
                    params = rows
                else:
                    result = rows
                continue
            if l.strip().startswith("No params"):
                params = None
            elif l.strip() and section:
                warnings.append(f"{name}: unexpected line in {section}: {l.strip()!r}")
            j += 1
        methods[name] = Method(name, direction, desc, params, result)
    missing = names - set(methods)
    if missing:
        raise ValueError(f"methods in index without a section: {sorted(missing)}")

    # notifications
    notes: dict[str, list[Row]] = {}
    k = i_notes + 1
    cur = None
    while k < i_events:
        l = lines[k]
        if l.startswith("field\ttype"):
            rows, k = _table(lines, k, warnings, f"notification {cur}")
            notes[cur] = rows
            continue
        if l.strip():
            cur = l.strip()
        k += 1

    # event kinds
    events: dict[str, list[Row]] = {}
    k = i_events + 1
    cur = None
    while k < i_errors:
        l = lines[k]
        if l.startswith("kind "):
            cur = l[5:].strip()
        elif l.startswith("field\ttype"):
            rows, k = _table(lines, k, warnings, f"event {cur}")
            events[cur] = rows
            continue
        k += 1

    # error codes
    codes = []
    for l in lines[i_errors + 1 :]:
        l = l.rstrip()
        if not l or l.startswith("code\t") or " " in l.split("\t")[0]:
            continue
        if re.fullmatch(r"[a-z_]+(\t.*)?", l):
            p = l.split("\t", 1)
            codes.append((p[0], p[1] if len(p) > 1 else ""))
    return Spec(version, caps, index, methods, notes, events, codes, warnings)


# --------------------------------------------------------------------------------------
# TypeScript-ish type parsing
# --------------------------------------------------------------------------------------


@dataclass
class T:
    kind: str  # prim | lit | union | array | object | record
    name: str = ""  # prim name / literal value
    items: list = dc_field(default_factory=list)  # union members
    elem: "T | None" = None  # array element / record value
    members: list = dc_field(default_factory=list)  # (name, optional, T, text)
    text: str = ""


class TypeParser:
    TOK = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\[\]|[{}()<>|;:,?])')

    def __init__(self, text: str):
        self.text = text
        self.toks = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = self.TOK.match(text, pos)
            if not m:
                raise ValueError(f"cannot tokenize {text!r} at {pos}")
            self.toks.append((m.group(1), m.start(1), m.end(1)))
            pos = m.end()
        self.i = 0

    def peek(self):
        return self.toks[self.i][0] if self.i < len(self.toks) else None

    def take(self, want=None):
        t = self.toks[self.i]
        if want is not None and t[0] != want:
            raise ValueError(f"expected {want!r} got {t[0]!r} in {self.text!r}")
        self.i += 1
        return t

    def parse(self) -> T:
        t = self.union()
        if self.i != len(self.toks):
            raise ValueError(f"trailing tokens in {self.text!r}")
        return t

    def union(self) -> T:
        start = self.toks[self.i][1]
        items = [self.postfix()]
        while self.peek() == "|":
            self.take()
            items.append(self.postfix())
        end = self.toks[self.i - 1][2]
        if len(items) == 1:
            return items[0]
        return T("union", items=items, text=self.text[start:end])

    def postfix(self) -> T:
        start = self.toks[self.i][1]
        t = self.primary()
        while self.peek() == "[]":
            self.take()
            t = T("array", elem=t)
            t.text = self.text[start:self.toks[self.i - 1][2]]
        return t

    def primary(self) -> T:
        tok, s, _ = self.take()
        if tok == "(":
            t = self.union()
            self.take(")")
            return t
        if tok == "{":
            members = []
            while self.peek() != "}":
                name = self.take()[0]
                opt = False
                if self.peek() == "?":
                    self.take()
                    opt = True
                self.take(":")
                ms = self.toks[self.i][1]
                mt = self.union()
                mt_text = self.text[ms:self.toks[self.i - 1][2]]
                mt.text = mt.text or mt_text
                members.append((name, opt, mt, mt_text))
                if self.peek() == ";":
                    self.take()
            _, _, e = self.take("}")
            return T("object", members=members, text=self.text[s:e])
        if tok == "Record":
            self.take("<")
            key = self.union()
            self.take(",")
            val = self.union()
            _, _, e = self.take(">")
            return T("record", elem=val, items=[key], text=self.text[s:e])
        if tok.startswith('"'):
            return T("lit", name=tok[1:-1], text=tok)
        if tok in ("string", "number", "boolean", "unknown", "null"):
            return T("prim", name=tok, text=tok)
        raise ValueError(f"unknown type token {tok!r} in {self.text!r}")


def parse_type(text: str) -> T:
    t = TypeParser(text).parse()
    t.text = text
    return t


# --------------------------------------------------------------------------------------
# Naming
# --------------------------------------------------------------------------------------


def pascal(name: str) -> str:
    out = []
    for seg in re.split(r"[._\-\s]+", name):
        if seg:
            out.append(seg[0].upper() + seg[1:])
    return "".join(out)


def snake(name: str) -> str:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


def protoc_json_name(snake_name: str) -> str:
    out, up = [], False
    for c in snake_name:
        if c == "_":
            up = True
        elif up:
            out.append(c.upper())
            up = False
        else:
            out.append(c)
    return "".join(out)


SINGULAR_SAME = {"tts", "stt", "news", "status", "content", "routing", "search", "browser",
                 "gateway", "required", "optional", "data", "series"}


def singular(word: str) -> str:
    w = word
    if w.lower() in SINGULAR_SAME:
        return w
    if w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes", "uses", "zes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def version_in_parens(desc: str) -> str | None:
    """First x.y.z that stands alone in parentheses, or ends a parenthesised list
    after `,` / `;` (e.g. "(1.14.0)", "(Projects, 1.7.0)")."""
    for m in re.finditer(r"\(([^()]*)\)", desc):
        inner = m.group(1).strip()
        mm = re.fullmatch(r"(?:.*[,;:]\s*)?(\d+\.\d+\.\d+)", inner)
        if mm:
            return mm.group(1)
    return None


# Fields whose description carries a version in parentheses that dates one of the field's
# *values*, not the field itself ("'readOnly' (...; 1.14.0)", "(1.13.0) repl.read").
NO_FIELD_SINCE = {"ApprovalAskResult.by", "ApprovalAskResult.scope"}

# Integral `number` fields (int64); everything else is double.
DOUBLE_NUMBERS = {"percent", "score", "rating", "temperature", "confidence", "cost", "ratio",
                  "costUsd", "secondsUntilExit"}
INT_REASON = {
    "seq": "monotonic sequence number",
    "afterSeq": "monotonic sequence number",
}


def number_type(name: str) -> tuple[str, str | None]:
    if name in DOUBLE_NUMBERS:
        return "double", None
    why = None
    if name in INT_REASON:
        why = INT_REASON[name]
    elif re.search(r"(Ms)$", name):
        why = "milliseconds"
    elif re.search(r"(bytes|Bytes|^size$|sizeBytes|^bytes)", name):
        why = "byte count"
    return "int64", why


# --------------------------------------------------------------------------------------
# Proto model
# --------------------------------------------------------------------------------------


@dataclass
class PField:
    name: str  # spec name
    ptype: str
    label: str  # "", "optional", "repeated"
    number: int
    desc: str
    required: bool = False
    values: list[str] = dc_field(default_factory=list)
    since: str | None = None
    nullable: bool = False
    notes: list[str] = dc_field(default_factory=list)  # extra comment lines


@dataclass
class PMessage:
    name: str
    comment: str
    fields: list[PField] = dc_field(default_factory=list)
    nested: list["PMessage"] = dc_field(default_factory=list)
    options: list[tuple[str, str]] = dc_field(default_factory=list)


@dataclass
class Stats:
    nested: int = 0
    value_fields: list[str] = dc_field(default_factory=list)  # Message.field for ambiguity Values
    imports: set = dc_field(default_factory=set)


class Builder:
    def __init__(self, stats: Stats):
        self.stats = stats

    def message(self, name: str, comment: str, rows: list[tuple[str, bool, str, str]],
                path: str) -> PMessage:
        """rows: (spec name, required, type text, description)."""
        msg = PMessage(name, comment)
        taken: set[str] = {name}
        # map entry names protoc synthesises
        for r in rows:
            taken.add(pascal(snake(r[0])) + "Entry")
        for n, (fname, req, ttext, desc) in enumerate(rows, 1):
            t = parse_type(ttext)
            f = PField(fname, "", "", n, desc, required=req)
            f.since = None if f"{path}.{fname}" in NO_FIELD_SINCE else version_in_parens(desc)
            self.map_type(msg, taken, f, t, ttext, f"{path}.{fname}")
            msg.fields.append(f)
        return msg

    def nested_name(self, taken: set[str], fname: str, is_array: bool) -> str:
        base = pascal(fname)
        if is_array:
            s = pascal(singular(fname))
            if s == base or s in taken:
                s = base + "Item"
            base = s
        if base in taken:
            base += "Item"
        k = 2
        cand = base
        while cand in taken:
            cand = f"{base}{k}"
            k += 1
        taken.add(cand)
        return cand

    def nested_object(self, parent: PMessage, taken: set[str], fname: str, t: T,
                      is_array: bool, path: str, note: str | None = None) -> str:
        nname = self.nested_name(taken, fname, is_array)
        rows = [(mn, not opt, mtext, "") for (mn, opt, mt, mtext) in t.members]
        comment = note or f"Inline object of `{fname}`."
        sub = self.message(nname, comment, rows, f"{path}")
        parent.nested.append(sub)
        self.stats.nested += 1
        return nname

    def use(self, imp: str):
        self.stats.imports.add(imp)

    def map_type(self, parent: PMessage, taken: set[str], f: PField, t: T, ttext: str, path: str):
        # strip null
        nullable = False
        if t.kind == "union":
            rest = [x for x in t.items if not (x.kind == "prim" and x.name == "null")]
            if len(rest) != len(t.items):
                nullable = True
                t = rest[0] if len(rest) == 1 else T("union", items=rest, text=t.text)
        f.nullable = nullable
        spec_type_note = f"spec type: {ttext}"

        def scalar_of(x: T, fname: str) -> tuple[str, str | None]:
            if x.kind == "prim":
                if x.name == "string":
                    return "string", None
                if x.name == "boolean":
                    return "bool", None
                if x.name == "number":
                    return number_type(fname)
            return "", None

        def is_str_union(x: T) -> bool:
            if x.kind == "lit":
                return True
            return x.kind == "union" and all(i.kind == "lit" for i in x.items)

        def lits(x: T) -> list[str]:
            return [x.name] if x.kind == "lit" else [i.name for i in x.items]

        def value(note_ambiguous: bool, repeated: bool = False):
            self.use("google/protobuf/struct.proto")
            f.ptype = "google.protobuf.Value"
            f.label = "repeated" if repeated else ""
            f.notes.append(spec_type_note)
            if note_ambiguous:
                self.stats.value_fields.append(f"{path}")

        # scalars
        st, why = scalar_of(t, f.name)
        if st:
            f.ptype = st
            f.label = "optional" if nullable else ""
            if why:
                f.notes.append(f"int64: {why}")
            return
        if is_str_union(t):
            f.ptype = "string"
            f.values = lits(t)
            f.label = "optional" if nullable else ""
            return
        if t.kind == "prim" and t.name == "unknown":
            value(False)
            return
        if t.kind == "object":
            f.ptype = self.nested_object(parent, taken, f.name, t, False, path)
            return
        if t.kind == "record":
            v = t.elem
            f.notes.append(spec_type_note)
            vs, _ = scalar_of(v, f.name)
            if v.kind == "prim" and v.name == "unknown":
                self.use("google/protobuf/struct.proto")
                f.ptype = "google.protobuf.Struct"
            elif v.kind == "prim" and v.name == "number":
                num = "int64" if f.name in ("counters",) else "double"
                f.ptype = f"map<string, {num}>"
            elif vs:
                f.ptype = f"map<string, {vs}>"
            elif is_str_union(v):
                f.ptype = "map<string, string>"
                f.values = lits(v)
            elif v.kind == "object":
                nn = self.nested_object(parent, taken, f.name, v, True, path)
                f.ptype = f"map<string, {nn}>"
            else:
                self.use("google/protobuf/struct.proto")
                f.ptype = "google.protobuf.Struct"
                f.notes.append("Struct: map values are not scalar; each value is a JSON value.")
            return
        if t.kind == "array":
            e = t.elem
            f.label = "repeated"
            es, why = scalar_of(e, f.name)
            if es:
                f.ptype = es
                if why:
                    f.notes.append(f"int64: {why}")
                return
            if is_str_union(e):
                f.ptype = "string"
                f.values = lits(e)
                return
            if e.kind == "object":
                f.ptype = self.nested_object(parent, taken, f.name, e, True, path)
                return
            if e.kind == "record" and e.elem.kind == "prim" and e.elem.name == "unknown":
                self.use("google/protobuf/struct.proto")
                f.ptype = "google.protobuf.Struct"
                f.notes.append(spec_type_note)
                return
            if e.kind == "union" and any(i.kind == "object" for i in e.items):
                objs = [i for i in e.items if i.kind == "object"]
                nn = self.nested_object(
                    parent, taken, f.name, objs[0], True, path,
                    note=f"Object form of a `{f.name}` item (the field is a Value because items "
                    f"may also be {' | '.join(i.text for i in e.items if i.kind != 'object')}).")
                value(True, repeated=True)
                f.notes.append(f"object items have the shape of {nn}")
                return
            if e.kind == "array":
                value(True, repeated=True)
                f.notes.append("items are JSON arrays (google.protobuf.ListValue)")
                return
            value(True, repeated=True)
            return
        if t.kind == "union":
            objs = [i for i in t.items if i.kind == "object"]
            value(True)
            if objs:
                nn = self.nested_object(parent, taken, f.name, objs[0], False, path,
                                        note=f"Object form of `{f.name}`.")
                f.notes.append(f"object form has the shape of {nn}")
            return
        value(True)


# --------------------------------------------------------------------------------------
# Layout: packages, areas, files
# --------------------------------------------------------------------------------------

PKG_OF_AREA = {"memory": "memory", "site": "memory", "job": "scheduler", "mcp": "mcp",
               "audio": "audio", "system": "system"}
NOTE_PKG = {"job": "scheduler", "mcp": "mcp", "audio": "audio", "system": "system"}
CALLBACKS = {"approval.request", "question.request", "tool.invoke"}
EVENT_FILES = {
    "message": "message",
    "turn": "turn", "usage": "turn", "context": "turn", "compaction": "turn",
    "error": "turn", "hook": "turn", "loop": "turn",
    "tool": "tool", "diff": "tool", "command": "tool", "lsp": "tool",
    "agent": "agent", "subagent": "agent", "team": "agent", "job": "agent",
    "mode": "state", "model": "state", "backend": "state", "checkpoint": "state",
    "plan": "state", "todos": "state", "audio": "state",
}
EVENT_FILE_DOC = {
    "message": "message.* payloads: streamed model output, reasoning and the user's message",
    "turn": "turn lifecycle payloads: turn.*, usage, context, compaction, error, hook and loop",
    "tool": "tool-execution payloads: tool.*, diff, command.progress and lsp.diagnostics",
    "agent": "delegation payloads: agent.changed, subagent.*, team.task.update and job.*",
    "state": "session-state payloads: mode, model, backend, checkpoints, plan, todos, audio",
    "misc": "other session.event payloads",
}


def pkg_of(name: str) -> str:
    return PKG_OF_AREA.get(name.split(".")[0], "session")


def direction_of(m: Method) -> str:
    if m.name in CALLBACKS:
        return "SERVER_TO_CLIENT"
    if m.desc.startswith("Notification:"):
        return "CLIENT_NOTIFICATION"
    if "server → client" in m.direction:
        return "SERVER_TO_CLIENT"
    return "CLIENT_TO_SERVER"


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


def wrap_comment(text: str, indent: str) -> list[str]:
    out = []
    prefix = indent + "// "
    for para in text.split("\n"):
        if not para.strip():
            out.append(indent + "//")
            continue
        w = textwrap.wrap(para, width=WIDTH - len(prefix), break_long_words=False,
                          break_on_hyphens=False)
        out += [prefix + l for l in w]
    return out


def q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_field(f: PField, indent: str) -> list[str]:
    out = []
    text = f.desc
    if text:
        out += wrap_comment(text, indent)
    for n in f.notes:
        # keep `spec type:` on one line so a doc generator can recover the TS type verbatim
        out += [f"{indent}// {n}"] if n.startswith("spec type:") else wrap_comment(n, indent)
    sname = snake(f.name)
    opts = []
    if protoc_json_name(sname) != f.name:
        opts.append(f"json_name = {q(f.name)}")
    if f.required:
        opts.append(f"({OPT}.required) = true")
    for v in f.values:
        opts.append(f"({OPT}.values) = {q(v)}")
    if f.since:
        opts.append(f"({OPT}.field_since) = {q(f.since)}")
    if f.nullable:
        opts.append(f"({OPT}.nullable) = true")
    label = f.label + " " if f.label else ""
    head = f"{indent}{label}{f.ptype} {sname} = {f.number}"
    if not opts:
        out.append(head + ";")
    else:
        one = head + " [" + ", ".join(opts) + "];"
        if len(one) <= WIDTH:
            out.append(one)
        else:
            out.append(head + " [")
            for k, o in enumerate(opts):
                out.append(f"{indent}  {o}{',' if k < len(opts) - 1 else ''}")
            out.append(f"{indent}];")
    return out


def render_message(m: PMessage, indent: str = "") -> list[str]:
    out = []
    if m.comment:
        out += wrap_comment(m.comment, indent)
    out.append(f"{indent}message {m.name} {{")
    inner = indent + "  "
    for k, v in m.options:
        out.append(f"{inner}option ({OPT}.{k}) = {q(v)};")
    if m.options and (m.nested or m.fields):
        out.append("")
    for k, n in enumerate(m.nested):
        out += render_message(n, inner)
        out.append("")
    for k, f in enumerate(m.fields):
        if k:
            out.append("")
        out += render_field(f, inner)
    out.append(f"{indent}}}")
    return out


@dataclass
class Rpc:
    name: str
    req: str
    resp: str
    method: Method
    direction: str


@dataclass
class ProtoFile:
    pkg: str
    fname: str
    header: str
    services: list[tuple[str, str, list[Rpc]]] = dc_field(default_factory=list)
    messages: list[PMessage] = dc_field(default_factory=list)
    enums: list[str] = dc_field(default_factory=list)  # pre-rendered
    imports: set = dc_field(default_factory=set)

    @property
    def path(self) -> str:
        return f"snowpea/{self.pkg}/v1/{self.fname}"

    def render(self) -> str:
        out = wrap_comment(self.header, "")
        out += ["syntax = \"proto3\";", "", f"package snowpea.{self.pkg}.v1;", ""]
        for imp in sorted(self.imports | {"snowpea/rpc/v1/options.proto"}):
            out.append(f'import "{imp}";')
        out.append("")
        for sname, scomment, rpcs in self.services:
            out += wrap_comment(scomment, "")
            out.append(f"service {sname} {{")
            for k, r in enumerate(rpcs):
                if k:
                    out.append("")
                out += wrap_comment(r.method.desc, "  ")
                out.append(f"  rpc {r.name}({r.req}) returns ({r.resp}) {{")
                out.append(f"    option ({OPT}.json_method) = {q(r.method.name)};")
                out.append(f"    option ({OPT}.direction) = {r.direction};")
                since = version_in_parens(r.method.desc)
                if since:
                    out.append(f"    option ({OPT}.since) = {q(since)};")
                out.append("  }")
            out.append("}")
            out.append("")
        for e in self.enums:
            out += e.split("\n")
            out.append("")
        for m in self.messages:
            out += render_message(m)
            out.append("")
        while out and out[-1] == "":
            out.pop()
        return "\n".join(out) + "\n"


AREA_DOC = {
    "session": "sessions: create, prompt, steer, resume, list and the per-session settings",
}


def build(spec: Spec) -> tuple[dict[str, ProtoFile], Stats]:
    stats = Stats()
    files: dict[str, ProtoFile] = {}
    boot = f"Bootstrapped from the Snowpea protocol spec {spec.version} by " \
           f"tools/spec2proto/spec2proto.py; hand-maintained from now on."

    def get(pkg: str, fname: str, header: str) -> ProtoFile:
        key = f"{pkg}/{fname}"
        if key not in files:
            files[key] = ProtoFile(pkg, fname, header + "\n\n" + boot)
        return files[key]

    def msg(name, comment, rows, path):
        stats.imports = set()
        b = Builder(stats)
        m = b.message(name, comment,
                      [(r.name, r.required, r.type, r.desc) for r in rows or []], path)
        return m, set(stats.imports)

    # methods, grouped by area (first segment) in index order
    areas: dict[str, list[Method]] = {}
    callbacks: list[Method] = []
    for name, _, _ in spec.index:
        m = spec.methods[name]
        if name in CALLBACKS:
            callbacks.append(m)
        else:
            areas.setdefault(name.split(".")[0], []).append(m)

    def add_method(pf: ProtoFile, m: Method, rpc_name: str, direction: str) -> Rpc:
        base = pascal(m.name)
        pm, imps = msg(base + "Params", f"Params of `{m.name}`.", m.params, base + "Params")
        pf.messages.append(pm)
        pf.imports |= imps
        if direction == "CLIENT_NOTIFICATION":
            pf.imports.add("google/protobuf/empty.proto")
            resp = "google.protobuf.Empty"
        else:
            rm, imps = msg(base + "Result", f"Result of `{m.name}`.", m.result, base + "Result")
            pf.messages.append(rm)
            pf.imports |= imps
            resp = rm.name
        return Rpc(rpc_name, pm.name, resp, m, direction)

    for area, ms in areas.items():
        pkg = pkg_of(ms[0].name)
        pf = get(pkg, f"{area}.proto",
                 f"The `{area}.*` JSON-RPC methods of the Snowpea protocol: the {pascal(area)}"
                 f"Service and the params/result message of each method.")
        rpcs = []
        for m in ms:
            rpc_name = pascal(".".join(m.name.split(".")[1:]))
            rpcs.append(add_method(pf, m, rpc_name, direction_of(m)))
        pf.services.append((f"{pascal(area)}Service",
                            f"JSON-RPC methods `{area}.*`.", rpcs))

    pf = get("session", "callbacks.proto",
             "Server→client requests of the Snowpea protocol (approval.request, "
             "question.request, tool.invoke): the daemon sends them to one client and waits "
             "for its answer. ClientCallbackService is implemented by clients, not the daemon.")
    rpcs = [add_method(pf, m, pascal(m.name), "SERVER_TO_CLIENT") for m in callbacks]
    pf.services.append(("ClientCallbackService",
                        "Requests the daemon sends to a client (server → client).", rpcs))

    # notifications
    for name, rows in spec.notifications.items():
        pkg = NOTE_PKG.get(name.split(".")[0], "session")
        pf = get(pkg, "notifications.proto",
                 f"Server→client JSON-RPC notifications owned by snowpea.{pkg}.v1: one message "
                 f"per notification, holding its params.")
        mname = pascal(name) + "Notification"
        m, imps = msg(mname, f"Params of the `{name}` notification.", rows, mname)
        m.options.append(("notification", name))
        pf.messages.append(m)
        pf.imports |= imps

    # session.event kinds
    for kind, rows in spec.events.items():
        grp = EVENT_FILES.get(kind.split(".")[0], "misc")
        pf = get("session", f"events_{grp}.proto",
                 f"Payloads of `session.event` kinds ({EVENT_FILE_DOC[grp]}). One message per "
                 f"kind; the `kind` field repeats the discriminator.")
        mname = pascal(kind) + "Event"
        m, imps = msg(mname, f"Payload of the `{kind}` session event.", rows, mname)
        m.options.append(("event_kind", kind))
        pf.messages.append(m)
        pf.imports |= imps

    # capabilities
    pf = get("system", "capabilities.proto",
             "Server capabilities advertised in the system.hello result (`capabilities`). "
             "Each value's `wire` option is the string the protocol uses.")
    lines = ["// A server capability advertised by system.hello.", "enum Capability {",
             "  // Not a capability.", "  CAPABILITY_UNSPECIFIED = 0;"]
    for k, c in enumerate(spec.capabilities, 1):
        lines.append(f"  CAPABILITY_{snake(c).upper()} = {k} [({OPT}.wire) = {q(c)}];")
    lines.append("}")
    pf.enums.append("\n".join(lines))
    return files, stats


# --------------------------------------------------------------------------------------
# Check mode
# --------------------------------------------------------------------------------------


def check(spec: Spec, root: str) -> int:
    methods, notes, kinds = {}, set(), set()
    for dirpath, _, fnames in os.walk(os.path.join(root, "snowpea")):
        for fn in fnames:
            if not fn.endswith(".proto"):
                continue
            text = open(os.path.join(dirpath, fn), encoding="utf-8").read()
            for m in re.finditer(r"option \(snowpea\.rpc\.v1\.json_method\) = \"([^\"]+)\";", text):
                methods[m.group(1)] = methods.get(m.group(1), 0) + 1
            notes |= set(re.findall(r"option \(snowpea\.rpc\.v1\.notification\) = \"([^\"]+)\";", text))
            kinds |= set(re.findall(r"option \(snowpea\.rpc\.v1\.event_kind\) = \"([^\"]+)\";", text))
    idx = {n for n, _, _ in spec.index}
    ok = True
    print(f"methods in spec index: {len(idx)}; rpcs with json_method: {sum(methods.values())}")
    if set(methods) != idx or any(v != 1 for v in methods.values()):
        ok = False
        print("  missing:", sorted(idx - set(methods)))
        print("  extra:", sorted(set(methods) - idx))
        print("  duplicated:", sorted(k for k, v in methods.items() if v != 1))
    print(f"notifications in spec: {len(spec.notifications)}; in proto: {len(notes)}")
    if notes != set(spec.notifications):
        ok = False
        print("  missing:", sorted(set(spec.notifications) - notes),
              "extra:", sorted(notes - set(spec.notifications)))
    print(f"event kinds in spec: {len(spec.events)}; in proto: {len(kinds)}")
    if kinds != set(spec.events):
        ok = False
        print("  missing:", sorted(set(spec.events) - kinds),
              "extra:", sorted(kinds - set(spec.events)))
    # error codes vs errors.proto
    ep = os.path.join(root, "snowpea/rpc/v1/errors.proto")
    if os.path.exists(ep):
        wires = set(re.findall(r"\(wire\) = \"([^\"]+)\"", open(ep).read()))
        codes = {c for c, _ in spec.error_codes}
        print(f"error codes in spec: {len(codes)}; in errors.proto: {len(wires)}")
        if codes - wires:
            print("  MISSING from errors.proto:", sorted(codes - wires))
        if wires - codes:
            print("  in errors.proto but not in spec:", sorted(wires - codes))
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default=DEFAULT_SPEC)
    ap.add_argument("--out", default="proto", help="proto root (default: proto)")
    ap.add_argument("--check", action="store_true",
                    help="do not write; compare the spec with the .proto files under --out")
    args = ap.parse_args(argv)
    spec = parse_spec(args.spec)
    if args.check:
        return check(spec, args.out)
    files, stats = build(spec)
    for w in spec.warnings:
        print("spec warning:", w, file=sys.stderr)
    for key, pf in sorted(files.items()):
        if pf.pkg in ("rpc", "supervisor"):
            raise SystemExit("refusing to write into rpc/ or supervisor/")
        path = os.path.join(args.out, pf.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        text = pf.render()
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {path} ({text.count(chr(10))} lines)")
    print(f"methods: {len(spec.methods)}, notifications: {len(spec.notifications)}, "
          f"event kinds: {len(spec.events)}, nested messages: {stats.nested}, "
          f"capabilities: {len(spec.capabilities)}")
    print("Value fields (ambiguous types):")
    for v in stats.value_fields:
        print("  ", v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
