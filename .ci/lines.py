#!/usr/bin/env python3
"""Source lines of one crate's library, as issue-style size budgets count them: every file
reached from `src/lib.rs` by `mod` declarations (the module loader of structure.py), less
test code: files that are only test modules (`#[cfg(test)] mod tests;`) and every
`#[cfg(test)]` item inside a file (inline `mod tests { .. }`, test-only functions and
`use`s). Tests (`tests/`) and benches are outside `src/` and never counted.

Prints the total lines (documentation and blank lines included) and the code lines (not
blank, not only a comment), per top folder and in all.

Usage: lines.py CRATE_DIR [--exclude SRC_RELATIVE_PREFIX ...] [--max N]
       (exit 1 when --max is given and the total is above it)
Example: lines.py crates/abide-outbox --exclude src/transport/smpp/ --max 7500
"""

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from structure import Crate, strip  # noqa: E402

CFG_TEST = re.compile(r"\s*#\[cfg\(test\)\]")
ATTR = re.compile(r"\s*#\[")


def counted_lines(path):
    """The lines of `path` outside `#[cfg(test)]` items."""
    raw = path.read_text(encoding="utf-8", errors="replace").split("\n")
    code = strip("\n".join(raw)).split("\n")
    if raw and raw[-1] == "":  # the end of the last line, not a line
        raw, code = raw[:-1], code[:-1]
    out, i, n = [], 0, len(raw)
    while i < n:
        if not CFG_TEST.match(code[i]):
            out.append(raw[i])
            i += 1
            continue
        # Skip the attribute, any further attributes, and the item they annotate: up to
        # its `;` or the brace that closes it.
        j = i + 1
        while j < n and ATTR.match(code[j]):
            j += 1
        depth, opened = 0, False
        while j < n:
            depth += code[j].count("{") - code[j].count("}")
            opened |= "{" in code[j]
            if (opened and depth <= 0) or (not opened and code[j].rstrip().endswith(";")):
                break
            j += 1
        i = j + 1
    return out


def is_code(line):
    s = line.strip()
    return bool(s) and not s.startswith("//")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("crate")
    ap.add_argument("--exclude", action="append", default=[])
    ap.add_argument("--max", type=int)
    a = ap.parse_args()
    root = Path(a.crate)
    crate = Crate(root / "src/lib.rs", root.name)
    per = {}
    for f in sorted(crate.files):
        rel = f.relative_to(root).as_posix()
        if f in crate.test_files or any(rel.startswith(x) for x in a.exclude):
            continue
        lines = counted_lines(f)
        parts = rel.split("/")
        group = "/".join(parts[:2]) if len(parts) > 2 else "src/*.rs"
        t, c = per.get(group, (0, 0))
        per[group] = (t + len(lines), c + sum(map(is_code, lines)))
    for g, (t, c) in sorted(per.items()):
        print(f"{t:7} {c:7}  {g}")
    total = sum(t for t, _ in per.values())
    code = sum(c for _, c in per.values())
    excl = "".join(f" --exclude {x}" for x in a.exclude)
    print(f"{total:7} {code:7}  total lines, code lines: {root.as_posix()}/src{excl}")
    if a.max is not None and total > a.max:
        print(f"lines: {total} above {a.max}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
