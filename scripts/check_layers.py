#!/usr/bin/env python3
"""Keeps a Rust crate's module architecture honest (standard library only, Python 3.11+).

Checks, for one crate's src/ directory (rules in scripts/layers.toml):

  cycles     no import cycles between files: every strongly connected component of the
             file graph with more than one file is reported, with one example cycle and
             the file:line of each import that closes it
  layers     top-level folders/files are ordered layers; a file imports only from its own
             layer or the layers below it, never above, and never from a peer in its own
             layer unless an `allow` pair says so; a file in no layer is an error
  words      per-area forbidden regexes, matched against code only (comments and doc
             comments are skipped, string literals in code count); grouped `use a::{B, C}`
             is checked member by member as `a::B`, `a::C`
  fn-length  fn items (methods and nested fns too) longer than max_fn_lines, counted from
             the line of `fn` to the line of its closing brace

Test code is ignored everywhere: items under `#[cfg(test)]` (a `mod tests { ... }` body,
a test-only fn or use), files of `#[cfg(test)] mod x;` declarations, files with
`#![cfg(test)]`, and files under any tests/ folder.

Usage:
  python3 scripts/check_layers.py                         # every check, [proxy] in layers.toml
  python3 scripts/check_layers.py --only cycles,fn-length
  python3 scripts/check_layers.py --src crates/other/src --only cycles --json

Exit status: 0 clean, 1 findings, 2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import bisect
import fnmatch
import json
import os
import re
import sys
import tomllib
from collections import deque
from dataclasses import dataclass, field

CHECKS = ("cycles", "layers", "words", "fn-length")
CHECK_ALIASES = {"cycle": "cycles", "layer": "layers", "forbid": "words", "word": "words",
                 "fn": "fn-length", "fn-lines": "fn-length", "fn_length": "fn-length"}
DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.toml")
DEFAULT_SRC = "crates/proxy/src"
DEFAULT_MAX_FN_LINES = 80


class ConfigError(Exception):
    pass


# --------------------------------------------------------------------------------------
# Lexing: two views of a file, both exactly as long as the source and with the same line
# breaks, so an offset means the same place in each.
#   code       comments blanked and the contents of string/char literals blanked
#              (delimiters kept): safe for brace matching and path scanning
#   nocomment  only comments blanked: string literals in code are still there
# --------------------------------------------------------------------------------------

_LEX = re.compile(
    r"""//|/\*"""
    r"""|(?<![A-Za-z0-9_])(?:br|cr|r)(?=\#*")"""  # raw string prefixes
    r"""|(?<![A-Za-z0-9_])[bc](?=")"""  # byte / C string prefixes
    r"""|(?<![A-Za-z0-9_])b(?=')"""  # byte char prefix
    r"""|"|'"""
)
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*"', re.S)
_CHAR_ESCAPED = re.compile(r"'\\(?:x[0-9A-Fa-f]{2}|u\{[0-9A-Fa-f_]*\}|.)'", re.S)
_BLOCK_COMMENT_PART = re.compile(r"/\*|\*/")
_NOT_NEWLINE = re.compile(r"[^\n]")


def _blank(s: str) -> str:
    return _NOT_NEWLINE.sub(" ", s)


def _apply_blanks(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out, pos = [], 0
    for a, b in sorted(spans):
        if b <= pos:
            continue
        a = max(a, pos)
        out.append(text[pos:a])
        out.append(_blank(text[a:b]))
        pos = b
    out.append(text[pos:])
    return "".join(out)


def lex(text: str) -> tuple[str, str]:
    """Returns (code, nocomment) views of Rust source `text`."""
    comments: list[tuple[int, int]] = []
    literals: list[tuple[int, int]] = []  # contents only, delimiters excluded
    n, i = len(text), 0
    while True:
        m = _LEX.search(text, i)
        if not m:
            break
        tok, i = m.group(), m.start()
        if tok == "//":
            end = text.find("\n", i)
            end = n if end < 0 else end
            comments.append((i, end))
            i = end
        elif tok == "/*":
            depth, j = 1, i + 2
            while depth:
                mm = _BLOCK_COMMENT_PART.search(text, j)
                if not mm:
                    j = n
                    break
                depth += 1 if mm.group() == "/*" else -1
                j = mm.end()
            comments.append((i, j))
            i = j
        elif tok in ("r", "br", "cr"):
            j = i + len(tok)
            hashes = 0
            while j < n and text[j] == "#":
                hashes, j = hashes + 1, j + 1
            start = j + 1  # past the opening quote
            close = text.find('"' + "#" * hashes, start)
            end = n if close < 0 else close
            literals.append((start, end))
            i = n if close < 0 else close + 1 + hashes
        elif tok in ("b", "c"):
            i += 1  # the literal itself is handled on the next round
        elif tok == '"':
            mm = _STRING_BODY.match(text, i + 1)
            end = mm.end() - 1 if mm else n
            literals.append((i + 1, end))
            i = end + 1
        else:  # "'": a char literal or a lifetime / label
            mm = _CHAR_ESCAPED.match(text, i)
            if mm:
                literals.append((i + 1, mm.end() - 1))
                i = mm.end()
            elif i + 2 < n and text[i + 2] == "'" and text[i + 1] not in "'\n":
                literals.append((i + 1, i + 2))
                i += 3
            else:
                i += 1  # lifetime or label: 'a
    nocomment = _apply_blanks(text, comments)
    code = _apply_blanks(text, comments + literals)
    return code, nocomment


def match_close(code: str, i: int) -> int:
    """Index of the bracket closing the one at code[i] ({, ( or [); len(code) if unclosed."""
    opener = code[i]
    closer = {"{": "}", "(": ")", "[": "]"}[opener]
    depth = 0
    pat = re.compile(re.escape(opener) + "|" + re.escape(closer))
    for m in pat.finditer(code, i):
        depth += 1 if m.group() == opener else -1
        if depth == 0:
            return m.start()
    return len(code)


_CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
_INNER_CFG_TEST = re.compile(r"#\s*!\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
_TEST_MOD_DECL = re.compile(
    r"\s*(?:pub\s*(?:\([^)]*\))?\s*)?mod\s+(?:r#)?([A-Za-z_]\w*)\s*;")
_WS = re.compile(r"\s*")


def _item_end(code: str, p: int) -> int:
    """End of the item (or statement, field, arm) starting at p, after an attribute."""
    n = len(code)
    while True:  # further attributes
        p = _WS.match(code, p).end()
        if code.startswith("#[", p) or code.startswith("#![", p):
            p = match_close(code, code.index("[", p)) + 1
            continue
        break
    depth, j = 0, p
    while j < n:
        c = code[j]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                return j
            depth -= 1
        elif depth == 0:
            if c == "{":
                return match_close(code, j) + 1
            if c in ";,":
                return j + 1
            if c == "}":
                return j
        j += 1
    return n


def strip_cfg_test(code: str) -> tuple[list[tuple[int, int]], list[str]]:
    """Spans of #[cfg(test)] items, and names of `#[cfg(test)] mod x;` declarations."""
    spans: list[tuple[int, int]] = []
    test_mods: list[str] = []
    pos = 0
    while True:
        m = _CFG_TEST.search(code, pos)
        if not m:
            break
        end = _item_end(code, m.end())
        decl = _TEST_MOD_DECL.match(code, m.end())
        if decl and decl.end() <= end:
            test_mods.append(decl.group(1))
        spans.append((m.start(), end))
        pos = max(end, m.end())
    return spans, test_mods


# --------------------------------------------------------------------------------------
# Use trees and paths
# --------------------------------------------------------------------------------------

_USE = re.compile(r"(?<![\w$#])use\b")
_USE_TOKEN = re.compile(r"r#[A-Za-z_]\w*|[A-Za-z_]\w*|::|[{},*;]|\S")
_IDENT = re.compile(r"(?:r#)?[A-Za-z_]\w*$")


@dataclass
class UsePath:
    segs: list[str]
    offset: int  # of its last token, for the line number
    alias: str | None = None
    glob: bool = False
    absolute: bool = False  # `use ::x` (an external crate)

    def text(self) -> str:
        return "::".join(self.segs + (["*"] if self.glob else []))


def parse_use(code: str, start: int) -> tuple[list[UsePath], int]:
    """Parses the use tree after the `use` keyword ending at `start`; returns its paths and
    the offset just past the closing `;`."""
    toks: list[tuple[str, int]] = []
    for m in _USE_TOKEN.finditer(code, start):
        if m.group() == ";":
            end = m.end()
            break
        toks.append((m.group(), m.start()))
    else:
        end = len(code)
    out: list[UsePath] = []
    pos = 0

    def peek(k: int = 0) -> str:
        return toks[pos + k][0] if pos + k < len(toks) else ""

    def tree(prefix: list[str], absolute: bool) -> None:
        nonlocal pos
        segs = list(prefix)
        if not segs and peek() == "::":
            absolute, pos = True, pos + 1
        while pos < len(toks):
            t, off = toks[pos]
            if t == "{":
                pos += 1
                while pos < len(toks) and peek() != "}":
                    before = pos
                    tree(segs, absolute)
                    if peek() == ",":
                        pos += 1
                    if pos == before:  # malformed: do not loop forever
                        pos += 1
                pos += 1
                return
            if t == "*":
                out.append(UsePath(segs, off, glob=True, absolute=absolute))
                pos += 1
                return
            if not _IDENT.match(t):
                return
            pos += 1
            if peek() == "::":
                segs.append(t)
                pos += 1
                continue
            alias = None
            if peek() == "as":
                alias = peek(1) or None
                pos += 2
            if t == "self" and segs:  # `a::{self, ..}` names `a` itself
                out.append(UsePath(segs, off, alias or segs[-1], absolute=absolute))
            else:
                out.append(UsePath(segs + [t], off, alias or t, absolute=absolute))
            return

    while pos < len(toks):
        before = pos
        tree([], False)
        if peek() == ",":
            pos += 1
        if pos == before:
            pos += 1
    return out, end


_INLINE_PATH = re.compile(
    r"(?<![\w$:.#'])((?:r#)?[A-Za-z_]\w*)((?:\s*::\s*(?:r#)?[A-Za-z_]\w*)+)")
_PATH_SEP = re.compile(r"\s*::\s*")
_PUB_IN = re.compile(r"pub\s*\(\s*in\s+$")
_MOD_DECL = re.compile(r"(?<![\w$#])mod\s+(?:r#)?([A-Za-z_]\w*)\s*;")
_FN = re.compile(r"(?<![\w$#])fn\s+((?:r#)?[A-Za-z_]\w*)")


def _unraw(s: str) -> str:
    return s[2:] if s.startswith("r#") else s


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


@dataclass
class SourceFile:
    rel: str  # posix path under src
    modpath: tuple[str, ...]
    text: str
    code: str = ""  # cfg(test) blanked too
    nocomment: str = ""  # cfg(test) blanked too
    newlines: list[int] = field(default_factory=list)
    use_paths: list[UsePath] = field(default_factory=list)
    use_spans: list[tuple[int, int]] = field(default_factory=list)
    test_mods: list[str] = field(default_factory=list)
    test_only: bool = False

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.newlines, offset - 1) + 1


def modpath_of(rel: str) -> tuple[str, ...]:
    parts = rel[:-3].split("/")
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return tuple(parts)


def load_files(src: str) -> dict[str, SourceFile]:
    files: dict[str, SourceFile] = {}
    for dirpath, dirnames, filenames in os.walk(src):
        reldir = os.path.relpath(dirpath, src)
        reldir = "" if reldir == "." else reldir.replace(os.sep, "/")
        # tests/ folders hold test code; bin/ holds separate crate roots
        dirnames[:] = sorted(d for d in dirnames
                             if d != "tests" and not (reldir == "" and d == "bin"))
        for name in sorted(filenames):
            if not name.endswith(".rs"):
                continue
            rel = f"{reldir}/{name}" if reldir else name
            with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            f = SourceFile(rel, modpath_of(rel), text)
            code, nocomment = lex(text)
            if _INNER_CFG_TEST.search(code):
                f.test_only = True
            spans, f.test_mods = strip_cfg_test(code)
            f.code = _apply_blanks(code, spans)
            f.nocomment = _apply_blanks(nocomment, spans)
            f.newlines = [m.start() for m in re.finditer("\n", text)]
            pos = 0
            while True:
                m = _USE.search(f.code, pos)
                if not m:
                    break
                paths, end = parse_use(f.code, m.end())
                f.use_paths.extend(paths)
                f.use_spans.append((m.start(), end))
                pos = end
            files[rel] = f
    # files of `#[cfg(test)] mod x;` declarations are test code
    modfiles = {f.modpath: f for f in files.values()}
    for f in list(files.values()):
        for name in f.test_mods:
            child = modfiles.get(f.modpath + (name,))
            if child:
                child.test_only = True
    changed = True
    while changed:  # and so is everything below them
        changed = False
        for f in files.values():
            if not f.test_only and len(f.modpath) > 0:
                parent = modfiles.get(f.modpath[:-1])
                if parent and parent.test_only and parent is not f:
                    f.test_only = changed = True
    return {rel: f for rel, f in files.items() if not f.test_only}


# --------------------------------------------------------------------------------------
# The import graph
# --------------------------------------------------------------------------------------


class Crate:
    def __init__(self, src: str):
        self.src = src
        self.files = load_files(src)
        self.modfiles: dict[tuple[str, ...], str] = {}
        for rel in sorted(self.files, key=lambda r: r.endswith("/mod.rs")):
            self.modfiles.setdefault(self.files[rel].modpath, rel)
        # edges[a][b] = sorted lines of a that refer to b
        self.edges: dict[str, dict[str, list[int]]] = {rel: {} for rel in self.files}
        # (file, line, path, file it fell back to) for paths naming a module with no file
        self.unresolved: list[tuple[str, int, str, str]] = []
        for f in self.files.values():
            self._scan(f)
        for a in self.edges:
            for b in self.edges[a]:
                self.edges[a][b] = sorted(set(self.edges[a][b]))

    def resolve(self, absolute: list[str]) -> tuple[str | None, int]:
        """The file defining the deepest module `absolute` names, and that module's depth."""
        for k in range(len(absolute), -1, -1):
            rel = self.modfiles.get(tuple(absolute[:k]))
            if rel:
                return rel, k
        return None, 0

    @staticmethod
    def _absolute(segs: list[str], f: SourceFile, local: dict[str, tuple[str, ...]]):
        segs = [_unraw(s) for s in segs]
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "super"):
            base, i = list(f.modpath), 0
            while i < len(segs) and segs[i] in ("self", "super"):
                if segs[i] == "super":
                    if not base:
                        return None
                    base.pop()
                i += 1
            return base + segs[i:]
        if segs[0] in local:
            return list(local[segs[0]]) + segs[1:]
        return None

    def _scan(self, f: SourceFile) -> None:
        # names that stand for modules of this crate in this file: declared children ...
        local: dict[str, tuple[str, ...]] = {}
        for m in _MOD_DECL.finditer(f.code):
            local[m.group(1)] = f.modpath + (m.group(1),)
        # ... and modules brought in by `use` (two rounds, for `use` of a `use`d alias)
        for _ in range(2):
            for u in f.use_paths:
                if u.absolute or u.glob or not u.alias or u.alias == "_":
                    continue
                absolute = self._absolute(u.segs, f, local)
                if absolute is None:
                    continue
                rel, depth = self.resolve(absolute)
                if rel and depth == len(absolute) and absolute:
                    local[_unraw(u.alias)] = tuple(absolute)

        def add(absolute: list[str] | None, offset: int, glob: bool = False) -> None:
            if absolute is None:
                return
            rel, depth = self.resolve(absolute)
            named = len(absolute) if glob else len(absolute) - 1
            if depth < named and absolute[depth][:1].islower():
                # a snake_case segment followed by more is a module: it has no file here
                missing = (f.rel, f.line(offset), "crate::" + "::".join(absolute[:depth + 1]),
                           rel or "?")
                if missing not in self.unresolved:
                    self.unresolved.append(missing)
            if rel and rel != f.rel:
                self.edges[f.rel].setdefault(rel, []).append(f.line(offset))

        for u in f.use_paths:
            if not u.absolute:
                add(self._absolute(u.segs, f, local), u.offset, u.glob)
        code = _apply_blanks(f.code, f.use_spans)
        for m in _INLINE_PATH.finditer(code):
            first = _unraw(m.group(1))
            if first not in ("crate", "self", "super") and first not in local:
                continue
            if _PUB_IN.search(code, max(0, m.start() - 16), m.start()):
                continue  # pub(in crate::x) is visibility, not a dependency
            segs = [m.group(1)] + _PATH_SEP.split(m.group(2))[1:]
            add(self._absolute(segs, f, local), m.start())


def tarjan(nodes: list[str], edges: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """Strongly connected components (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    sccs: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    sccs.append(sorted(comp))
    return sccs


def shortest_cycle(start: str, members: set[str], edges) -> list[str]:
    """Shortest cycle through `start` inside `members`, as [start, ..., start]."""
    prev: dict[str, str] = {}
    queue = deque()
    for w in sorted(edges[start]):
        if w in members and w not in prev:
            prev[w] = start
            queue.append(w)
    while queue:
        v = queue.popleft()
        if v == start:
            break
        for w in sorted(edges[v]):
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    path, v = [start], prev.get(start)
    while v is not None and v != start:
        path.append(v)
        v = prev[v]
    path.append(start)
    path.reverse()
    return path


# --------------------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------------------


@dataclass
class Finding:
    check: str
    file: str  # relative to src
    line: int
    message: str
    details: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)


def check_cycles(crate: Crate, verbose: bool = False) -> list[Finding]:
    out = []
    for comp in sorted(tarjan(sorted(crate.files), crate.edges)):
        if len(comp) < 2:
            continue
        members = set(comp)
        cycle = shortest_cycle(comp[0], members, crate.edges)
        steps = []
        for a, b in zip(cycle, cycle[1:]):
            lines = crate.edges[a][b]
            steps.append({"from": a, "to": b, "lines": lines})
        details = [f"{s['from']}:{','.join(map(str, s['lines']))} -> {s['to']}" for s in steps]
        inner = [{"from": a, "to": b, "lines": crate.edges[a][b]}
                 for a in comp for b in sorted(crate.edges[a]) if b in members]
        pairs = [f"{a} <-> {b}" for a in comp for b in sorted(crate.edges[a])
                 if b in members and a < b and a in crate.edges[b]]
        if pairs and len(comp) > 2:
            details.append("two-file cycles inside it: " + ", ".join(pairs))
        if verbose:
            details.append(f"all {len(inner)} imports inside the component:")
            details += [f"  {e['from']}:{','.join(map(str, e['lines']))} -> {e['to']}"
                        for e in inner]
        first = steps[0]
        out.append(Finding(
            "cycles", first["from"], first["lines"][0],
            f"import cycle among {len(comp)} files: {', '.join(comp)}; for example "
            + " -> ".join(cycle),
            details,
            {"files": comp, "example": steps, "mutual": pairs, "edges": inner}))
    return out


def _layer_key(name: str) -> str:
    name = name.strip("/")
    return name[:-3] if name.endswith(".rs") else name


def check_layers(crate: Crate, cfg: dict, warnings: list[str]) -> list[Finding]:
    layers = cfg.get("layers")
    if not isinstance(layers, list) or not layers:
        raise ConfigError("`layers` must be a non-empty list of lists of names")
    where: dict[str, tuple[int, str]] = {}
    for i, layer in enumerate(layers):
        if isinstance(layer, str):
            layer = [layer]
        for name in layer:
            key = _layer_key(name)
            if key in where:
                raise ConfigError(f"layer name {name!r} appears twice")
            where[key] = (i, name)
    allow = set()
    for pair in cfg.get("allow", []):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ConfigError(f"`allow` entries are [importer, imported] pairs, not {pair!r}")
        allow.add((_layer_key(pair[0]), _layer_key(pair[1])))

    def key_of(rel: str) -> str:
        return _layer_key(rel.split("/")[0])

    present = {key_of(rel) for rel in crate.files}
    for key, (i, name) in sorted(where.items(), key=lambda kv: kv[1]):
        if key not in present:
            warnings.append(f"layers: {name!r} (layer {i + 1}) names nothing under src")
    out = []
    for rel in sorted(crate.files):
        if key_of(rel) not in where:
            out.append(Finding("layers", rel, 1,
                               f"unassigned: {key_of(rel)!r} is in no layer of layers.toml"))
    for a in sorted(crate.edges):
        ka = key_of(a)
        for b, lines in sorted(crate.edges[a].items()):
            kb = key_of(b)
            if ka == kb or ka not in where or kb not in where or (ka, kb) in allow:
                continue
            (ia, na), (ib, nb) = where[ka], where[kb]
            if ib < ia:
                why = f"upward: {na!r} is layer {ia + 1}, {nb!r} is layer {ib + 1} above it"
            elif ib == ia:
                why = (f"sideways: {na!r} and {nb!r} are peers in layer {ia + 1} "
                       f"(allow [{na!r}, {nb!r}] to permit)")
            else:
                continue
            for line in lines:
                out.append(Finding("layers", a, line, f"imports {b} -- {why}",
                                   data={"to": b}))
    return out


def _under(rel: str, prefix: str) -> bool:
    p = prefix.strip("/")
    if p.endswith(".rs"):
        p = p[:-3]
    if any(c in p for c in "*?["):
        return (fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(rel, p + ".rs")
                or fnmatch.fnmatchcase(rel, p + "/*"))
    return rel == p + ".rs" or rel.startswith(p + "/")


def check_words(crate: Crate, cfg: dict, warnings: list[str]) -> list[Finding]:
    out = []
    for n, rule in enumerate(cfg.get("forbid", [])):
        under = rule.get("under", [])
        except_ = rule.get("except", [])
        under = [under] if isinstance(under, str) else under
        except_ = [except_] if isinstance(except_, str) else except_
        try:
            words = [re.compile(w) for w in rule.get("words", [])]
        except re.error as e:
            raise ConfigError(f"forbid rule {n + 1}: bad regex: {e}") from e
        why = rule.get("why", "")
        for p in under + except_:
            if not any(_under(rel, p) for rel in crate.files):
                warnings.append(f"words: forbid rule {n + 1}: {p!r} names nothing under src")
        for rel in sorted(crate.files):
            if not any(_under(rel, p) for p in under) or any(_under(rel, p) for p in except_):
                continue
            f = crate.files[rel]
            code = _apply_blanks(f.nocomment, f.use_spans)
            hits: list[tuple[int, str]] = []
            for w in words:
                for m in w.finditer(code):
                    shown = m.group()
                    if shown.endswith("::"):  # name what follows the path separator
                        tail = re.match(r"(?:r#)?\w+", code[m.end():])
                        shown += tail.group() if tail else ""
                    hits.append((m.start(), f"{shown!r} matches /{w.pattern}/"))
                for u in f.use_paths:
                    if w.search(u.text()):
                        hits.append((u.offset, f"use of {u.text()!r} matches /{w.pattern}/"))
            for off, msg in sorted(hits):
                out.append(Finding("words", rel, f.line(off),
                                   f"forbidden: {msg}" + (f" ({why})" if why else "")))
    return out


def check_fn_length(crate: Crate, max_lines: int) -> list[Finding]:
    out = []
    for rel in sorted(crate.files):
        f = crate.files[rel]
        code, n = f.code, len(f.code)
        for m in _FN.finditer(code):
            depth, j = 0, m.end()
            body = None
            while j < n:
                c = code[j]
                if c in "([":
                    depth += 1
                elif c in ")]":
                    depth -= 1
                elif depth <= 0 and c == ";":
                    break  # no body: a trait method declaration
                elif depth <= 0 and c == "{":
                    body = j
                    break
                j += 1
            if body is None:
                continue
            close = match_close(code, body)
            first, last = f.line(m.start()), f.line(close)
            length = last - first + 1
            if length > max_lines:
                out.append(Finding("fn-length", rel, first,
                                   f"fn {_unraw(m.group(1))} is {length} lines "
                                   f"(max {max_lines}; lines {first}-{last})",
                                   data={"fn": _unraw(m.group(1)), "lines": length}))
    return out


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def load_config(path: str | None, section: str) -> tuple[dict, str | None]:
    """The crate's table from the rule file, and the directory its relative src is under."""
    if path is None:
        if not os.path.exists(DEFAULT_CONFIG):
            return {}, None
        path = DEFAULT_CONFIG
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from e
    if section not in doc:
        raise ConfigError(f"{path}: no [{section}] table")
    # a relative src in scripts/layers.toml is relative to the repository root
    base = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    return doc[section], base


def parse_only(s: str | None) -> list[str]:
    if not s:
        return list(CHECKS)
    chosen = []
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        name = CHECK_ALIASES.get(part, part)
        if name not in CHECKS:
            raise ConfigError(f"--only: unknown check {part!r} (known: {', '.join(CHECKS)})")
        chosen.append(name)
    return chosen


def shown(src: str) -> str:
    rel = os.path.relpath(src)
    return os.path.normpath(src if rel.startswith("..") else rel)


def show_rel(src: str, rel: str) -> str:
    return f"{shown(src)}/{rel}"


def run(argv: list[str] | None = None, stdout=None) -> int:
    stdout = stdout or sys.stdout
    ap = argparse.ArgumentParser(
        description="Check a Rust crate's import cycles, layers, forbidden words and fn "
                    "lengths.")
    ap.add_argument("--config", help="rule file (default: layers.toml beside this script)")
    ap.add_argument("--crate", default="proxy", help="table of the rule file (default: proxy)")
    ap.add_argument("--src", help="the crate's src directory (default: from the rule file, "
                                  f"else {DEFAULT_SRC}); relative to the current directory")
    ap.add_argument("--only", help=f"comma-separated checks to run: {','.join(CHECKS)}")
    ap.add_argument("--max-fn-lines", type=int, help="override max_fn_lines")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="list every import inside each cycle's component")
    args = ap.parse_args(argv)
    try:
        only = parse_only(args.only)
        cfg, base = load_config(args.config, args.crate)
        if args.src:
            src = args.src
        elif "src" in cfg:
            src = os.path.join(base, cfg["src"]) if base else cfg["src"]
        else:
            src = DEFAULT_SRC
        if not os.path.isdir(src):
            raise ConfigError(f"{src}: not a directory")
        max_fn = args.max_fn_lines or int(cfg.get("max_fn_lines", DEFAULT_MAX_FN_LINES))
        crate = Crate(src)
        warnings: list[str] = []
        findings: list[Finding] = []
        if "cycles" in only or "layers" in only:
            warnings += [f"{show_rel(src, a)}:{line}: no file for module {path}; "
                         f"counted as an import of {b}" for a, line, path, b in crate.unresolved]
        if "cycles" in only:
            findings += check_cycles(crate, args.verbose)
        if "layers" in only:
            findings += check_layers(crate, cfg, warnings)
        if "words" in only:
            findings += check_words(crate, cfg, warnings)
        if "fn-length" in only:
            findings += check_fn_length(crate, max_fn)
    except ConfigError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2

    shown_src = shown(src)

    def show(rel: str) -> str:
        return show_rel(src, rel)

    counts = {c: sum(1 for f in findings if f.check == c) for c in only}
    if args.json:
        json.dump({
            "src": shown_src,
            "checks": only,
            "files": len(crate.files),
            "findings": [{"check": f.check, "file": show(f.file), "line": f.line,
                          "message": f.message, **f.data} for f in findings],
            "warnings": warnings,
            "counts": counts,
        }, stdout, indent=2)
        stdout.write("\n")
    else:
        for w in warnings:
            print(f"warning: {w}", file=stdout)
        for f in findings:
            print(f"{show(f.file)}:{f.line}: {f.check}: {f.message}", file=stdout)
            for d in f.details:
                print(f"    {d}", file=stdout)
        lines = sum(len(f.newlines) + 1 for f in crate.files.values())
        parts = ", ".join(f"{counts[c]} {c}" for c in only)
        verdict = "FAIL" if findings else "ok"
        print(f"check_layers: {verdict}: {len(findings)} finding(s) ({parts}) in "
              f"{len(crate.files)} files, {lines} lines under {shown_src}", file=stdout)
    return 1 if findings else 0


if __name__ == "__main__":
    try:
        sys.exit(run())
    except BrokenPipeError:  # e.g. piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
