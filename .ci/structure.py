#!/usr/bin/env python3
"""Two rules of the code layout, checked for every crate of the workspace:

1. No import circle between files: file A naming an item of file B (a `use` path or an
   inline `crate::`/`super::`/`self::` path) while B, directly or through other files,
   names one of A's. A circle means the files are one idea split in two, or that a shared
   piece lives in one of them instead of a file of its own.
   Test code (`#[cfg(test)]` modules) is left out: a test may use what it tests from
   anywhere.
2. No source file over 600 lines before its tests (the first `#[cfg(test)]`); a file that
   is only a test module (`#[cfg(test)] #[path = ..] mod tests;`) is not counted.

Modules are found from each crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`,
`tests/*.rs`, `tests/*/main.rs`, `benches/*.rs`, `examples/*.rs`) by following `mod`
declarations, `#[path]` included. A path is resolved to the file that defines the longest
module prefix of it; a name that module re-exports (`pub use`) is followed to its source,
so `use crate::Error` over `pub use error::Error` in lib.rs is an edge to error.rs. A
module's `pub use` of its own descendants (a facade) is not an edge. Approximations: a glob
re-export is not followed; a name in scope through a plain `use` is not followed either.

Problems listed in .ci/structure-known.txt (one a line: `circle FILE FILE..` with the files
sorted, or `long FILE`) are debt being paid elsewhere: reported, but they do not fail the
run; a listed problem that is gone is reported too, so the list only shrinks.

Usage: structure.py [--max-lines N] [--known FILE] [ROOT]   (exit 1 on a new problem)
       structure.py --self-test   (the checker on small crates it must pass or fail)
"""

import argparse
import re
import sys
from pathlib import Path

MAX_LINES = 600
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The code with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            j = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\[^']{1,10}|[^\\'])'", text[i:i + 14])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_paths(tree):
    """Expand a use tree (`a::{b, c::{d as e, *}}`) into (segments, bound name) pairs; the
    name is what the path is called in the file (`e` for `d as e`), None for a glob."""
    tree = re.sub(r"\s+as\s+(" + IDENT + ")", r"@\1", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        # split s at top-level commas
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            if "{" in p:
                head, rest = p.split("{", 1)
                head = head.rstrip(":")
                segs = [x for x in head.split("::") if x] if head else []
                walk(prefix + segs, rest[: rest.rfind("}")])
            else:
                p, _, alias = p.partition("@")
                segs = [x for x in p.split("::") if x]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                full = prefix + segs
                name = alias or (full[-1] if full and full[-1] != "*" else None)
                out.append((full, name))

    walk([], tree)
    return out


class Crate:
    def __init__(self, root_file, name):
        self.name = name
        self.modules = {}  # module path tuple -> file (inline modules map to their file)
        self.files = {}  # file -> module path tuple
        self.test_files = set()
        self.uses = []  # (file, module path, segments, is_pub, line)
        self.reexports = {}  # module path -> {name: (module path of the use, segments)}
        self.aliases = {}  # (file, module path) -> {name a use binds: segments}
        self.inline = []  # (file, module path, segments, line): paths in code, not in a use
        self.load(Path(root_file), (), False)

    def load(self, path, modpath, is_test):
        if not path.exists() or path in self.files:
            return
        raw = path.read_text(encoding="utf-8", errors="replace")
        self.files[path] = modpath
        self.modules[modpath] = path
        if is_test:
            self.test_files.add(path)
        attrs = {}
        for m in re.finditer(
            r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(' + IDENT + r")\s*;",
            raw,
        ):
            attrs[m.group(2)] = m.group(1)
        code = strip(raw)
        mod_rs = path.name in ("mod.rs", "lib.rs", "main.rs") or modpath == ()
        base = path.parent if mod_rs else path.parent / path.stem
        stack = []  # entries: module name or None per open brace
        token = re.compile(
            r"(?P<cfgtest>#\[cfg\(test\)\])"
            r"|(?P<mod>\bmod\s+(?P<mname>" + IDENT + r")\s*(?P<mend>[;{]))"
            r"|(?P<use>\b(?P<pub>pub(?:\([^)]*\))?\s+)?use\s+(?P<tree>[^;]+);)"
            r"|(?P<path>(?<![\w:.])" + IDENT + r"(?:::" + IDENT + r")+)"
            r"|(?P<open>\{)|(?P<close>\})"
        )
        pending_test = False
        test_depth = 0  # depth of the open `#[cfg(test)] mod .. {`, 0 outside one
        for m in token.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            inline = tuple(x for x in stack if x is not None)
            here = modpath + inline
            if m.group("cfgtest"):
                pending_test = True
                continue
            if m.group("mod"):
                name = m.group("mname")
                if m.group("mend") == ";":
                    if name in attrs and not inline:
                        child = path.parent / attrs[name]
                    else:
                        d = base.joinpath(*inline)
                        child = d / f"{name}.rs"
                        if not child.exists():
                            child = d / name / "mod.rs"
                    self.load(child, here + (name,), is_test or pending_test)
                else:
                    stack.append(name)
                    self.modules[here + (name,)] = path
                    if pending_test:
                        test_depth = test_depth or len(stack)
                pending_test = False
                continue
            if m.group("open"):
                stack.append(None)
                pending_test = False
                continue
            if m.group("close"):
                if stack:
                    stack.pop()
                if test_depth and len(stack) < test_depth:
                    test_depth = 0
                continue
            pending_test = False
            if is_test or test_depth:
                continue  # test code may use what it tests from anywhere
            if m.group("use"):
                is_pub = bool(m.group("pub"))
                for segs, name in use_paths(m.group("tree")):
                    self.uses.append((path, here, segs, is_pub, line))
                    if name and segs:
                        self.aliases.setdefault((path, here), {})[name] = segs
                        if is_pub:
                            self.reexports.setdefault(here, {})[name] = (here, segs)
            elif m.group("path"):
                self.inline.append((path, here, m.group("path").split("::"), line))

    def absolute(self, here, segs):
        """Absolute module path of `segs` seen from module `here`, or None (external)."""
        if not segs:
            return None
        if segs[0] == "crate":
            return list(segs[1:])
        if segs[0] in ("self", "super"):
            cur = list(here)
            i = 0
            while i < len(segs) and segs[i] in ("self", "super"):
                if segs[i] == "super":
                    if not cur:
                        return None
                    cur.pop()
                i += 1
            return cur + list(segs[i:])
        if tuple(here) + (segs[0],) in self.modules:
            return list(here) + list(segs)
        return None

    def target(self, abs_path, depth=0):
        """The module an absolute path's item lives in (re-exports followed)."""
        best = ()
        for k in range(len(abs_path), -1, -1):
            if tuple(abs_path[:k]) in self.modules:
                best = tuple(abs_path[:k])
                break
        rest = abs_path[len(best):]
        if rest and depth < 8:
            re_map = self.reexports.get(best, {})
            if rest[0] in re_map:
                src_here, src_segs = re_map[rest[0]]
                nxt = self.absolute(src_here, src_segs)
                if nxt is not None and nxt != list(abs_path):
                    return self.target(nxt + list(rest[1:]), depth + 1)
        return best

    def edges(self):
        out = {}
        uses = list(self.uses)
        # A path in code: from the crate (`crate::`, `super::`, `self::`), through a child
        # module (`fields::Fields`), or through a name a `use` of this module bound.
        for path, here, segs, line in self.inline:
            if segs[0] in ("crate", "super", "self") or tuple(here) + (segs[0],) in self.modules:
                uses.append((path, here, segs, False, line))
                continue
            bound = self.aliases.get((path, here), {}).get(segs[0])
            if bound is not None and bound[0] != segs[0]:
                uses.append((path, here, bound + segs[1:], False, line))
        for path, here, segs, is_pub, line in uses:
            abs_path = self.absolute(here, segs)
            if abs_path is None:
                continue
            mod = self.target(abs_path)
            dst = self.modules.get(mod)
            if dst is None or dst == path:
                continue
            if is_pub and mod[: len(here)] == tuple(here):
                continue  # a facade re-exporting its own descendant
            out.setdefault(path, {}).setdefault(dst, line)
        return out


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return comps


def roots(crate_dir):
    c = Path(crate_dir)
    found = [p for p in (c / "src/lib.rs", c / "src/main.rs") if p.exists()]
    for pattern in ("src/bin/*.rs", "src/bin/*/main.rs", "tests/*.rs", "tests/*/main.rs",
                    "benches/*.rs", "examples/*.rs"):
        found += sorted(c.glob(pattern))
    return found


SELF_TEST = {
    # name: ({file: text}, circles expected (sorted file lists), long files expected)
    "use circle": ({"src/lib.rs": "mod a;\nmod b;\n",
                    "src/a.rs": "use crate::b::B;\npub struct A;\n",
                    "src/b.rs": "pub struct B(crate::a::A);\n"},
                   [["src/a.rs", "src/b.rs"]], []),
    "parent dispatches, child reads parent": ({
        "src/lib.rs": "mod p;\n",
        "src/p/mod.rs": "mod c;\npub struct T;\npub fn f() { c::g() }\n",
        "src/p/c.rs": "use super::T;\npub fn g() { let _ = T; }\n"},
        [["src/p/c.rs", "src/p/mod.rs"]], []),
    "facade and re-export followed, test code left out": ({
        "src/lib.rs": "mod e;\nmod u;\npub use e::Error;\n",
        "src/e.rs": "pub struct Error;\n#[cfg(test)]\nmod tests {\n    use crate::u::f;\n}\n",
        "src/u.rs": "use crate::Error;\npub fn f() -> Option<Error> { None }\n"},
        [], []),
    "aliased use and comments": ({
        "src/lib.rs": "mod a;\nmod b;\n// use crate::a::X;\n",
        "src/a.rs": "use crate::b as other;\npub fn x() { other::y() }\n",
        "src/b.rs": "/* crate::a::x() */\npub fn y() { let _ = \"crate::a::x\"; }\n"},
        [], []),
    "long file before tests only": ({
        "src/lib.rs": "mod big;\nmod ok;\nmod limit;\n",
        "src/limit.rs": "//\n" * 600,
        "src/big.rs": "//\n" * 601,
        "src/ok.rs": "//\n" * 10 + "#[cfg(test)]\nmod tests {\n" + "//\n" * 700 + "}\n"},
        [], ["src/big.rs"]),
}


def self_test():
    import tempfile
    failed = 0
    for name, (files, want_circles, want_long) in SELF_TEST.items():
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            for rel, text in files.items():
                f = root / rel
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(text)
            crate = Crate(root / "src/lib.rs", name)
            got = sorted(sorted(str(p.relative_to(root)) for p in c) for c in cycles(crate.edges()))
            long = sorted(str(f.relative_to(root)) for f in crate.files if lines_before_tests(f) > MAX_LINES)
            ok = got == sorted(want_circles) and long == want_long
            failed += not ok
            print(f"self-test {'ok' if ok else 'FAILED'}: {name}" + ("" if ok else f": circles {got}, long {long}"))
    return 1 if failed else 0


def lines_before_tests(f):
    n = 0
    for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            break
        n += 1
    return n


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-lines", type=int, default=MAX_LINES)
    ap.add_argument("--known", default=Path(__file__).resolve().parent / "structure-known.txt")
    ap.add_argument("root", nargs="?", default=Path(__file__).resolve().parent.parent)
    a = ap.parse_args()
    root = Path(a.root)
    known = set()
    if Path(a.known).exists():
        for line in Path(a.known).read_text().split("\n"):
            line = line.split("#")[0].strip()
            if line:
                known.add(" ".join(line.split()))
    seen = set()
    crate_dirs = sorted(p.parent for p in root.glob("crates/*/Cargo.toml"))
    if (root / "benches").is_dir() or (root / "src").is_dir():
        crate_dirs.append(root)
    bad = 0
    for cdir in crate_dirs:
        for r in roots(cdir):
            crate = Crate(r, f"{cdir.name}:{r.relative_to(cdir)}")
            e = crate.edges()
            for comp in cycles(e):
                rel = [str(p.relative_to(root)) for p in comp]
                key = "circle " + " ".join(rel)
                seen.add(key)
                if key in known:
                    print(f"known: import circle in {crate.name}: " + " <-> ".join(rel))
                    continue
                bad += 1
                print(f"import circle in {crate.name}: " + " <-> ".join(rel))
                for s in comp:
                    for d, line in sorted(e.get(s, {}).items()):
                        if d in comp:
                            print(f"    {s.relative_to(root)}:{line} uses {d.relative_to(root)}")
            if r.parts[-2] != "src" and r.parent.name not in ("bin",) and "src" not in r.parts:
                continue  # file length applies to library and binary sources
            for f in crate.files:
                if f in crate.test_files:
                    continue
                n = lines_before_tests(f)
                if n > a.max_lines:
                    key = f"long {f.relative_to(root)}"
                    seen.add(key)
                    msg = f"{f.relative_to(root)}: {n} lines before tests (limit {a.max_lines})"
                    if key in known:
                        print(f"known: {msg}")
                        continue
                    bad += 1
                    print(msg)
    for key in sorted(known - seen):
        print(f"gone (remove it from {a.known}): {key}")
    if bad:
        print(f"structure: {bad} new problem(s)")
        return 1
    print(f"structure: no new import circle or long file ({len(known & seen)} known)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
