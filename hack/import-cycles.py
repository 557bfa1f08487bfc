#!/usr/bin/env python3
"""Counts the import cycles between the source files of every crate.

Usage: hack/import-cycles.py [crates-dir]   (default: crates/)
       hack/import-cycles.py --upward DIR [crates-dir]
Prints the number of cycles (0 when there is none), then each cycle, one
line a cycle; exits 1 when there is one. Run by `make lint`.

With `--upward DIR`: prints the number of upward imports of the files
under DIR (a path into one of their own ancestors' mod.rs, below the crate
root: `use super::Context` in controller/kind.rs when controller/mod.rs
defines it), then each, one line an import; exits 1 when there is one. A
folder whose mod.rs only declares and re-exports has none: its files name
each other, never the folder they live in (`make lint` checks
controller/).

Why a script of our own: cargo and clippy see modules, not files, and the
tools that draw module graphs (cargo-modules) need a nightly toolchain or a
download the build does not make; a cycle between files is a matter of
which paths a file names, which a reading of the text answers.

What counts as an edge, file A -> file B: A names a path into B, in a `use`
(groups `{...}` expanded) or inline in its code (`crate::plan::fight::carried`),
through `crate::`, `super::` or `self::`; the path is resolved to the
longest module prefix that is a file of the crate. Not counted:
- an edge to a file's own ancestors (`super::Context` into the parent's
  mod.rs): a parent declares its children (`mod x;`) and holds what they
  share, so that edge would close a cycle in every crate; what is checked is
  that no two files that are not each other's ancestors depend on each
  other, directly or around a ring;
- the inline test module at the end of a file (`#[cfg(test)] mod tests {`),
  whose `super::` is the file itself; test files of their own
  (`sequence_tests.rs`) are counted like any file;
- comments and doc comments.
"""

import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{)?")
USE = re.compile(r"\buse\s+(crate|super|self)::([^;]*);", re.S)


def strip(text):
    """The code of a file: no comments, no trailing inline test module."""
    cut = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    # `pub(in crate::a)` is a visibility, not a path the file uses.
    text = re.sub(r"pub\(in [^)]*\)", "pub", text)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def expand(tree):
    """The paths of a use tree without its root: `a::{b, c::{d, e}}`."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0].strip()]
    prefix = tree[:brace].rstrip(":").strip()
    inner = tree[brace + 1 : tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    out = []
    for p in parts:
        if p.strip():
            for sub in expand(p):
                out.append(f"{prefix}::{sub}" if prefix else sub)
    return out


def crate_roots(crate):
    src = os.path.join(crate, "src")
    roots = []
    for name in ("lib.rs", "main.rs"):
        if os.path.exists(os.path.join(src, name)):
            roots.append((os.path.join(src, name), src))
    bins = os.path.join(src, "bin")
    if os.path.isdir(bins):
        for entry in sorted(os.listdir(bins)):
            path = os.path.join(bins, entry)
            if entry.endswith(".rs"):
                roots.append((path, os.path.join(bins, entry[:-3])))
            elif os.path.exists(os.path.join(path, "main.rs")):
                roots.append((os.path.join(path, "main.rs"), path))
    return roots


def modules(root, base):
    """Module path (tuple) -> file, for the crate rooted at `root`."""
    files = {(): root}
    stack = [((), root, base)]
    while stack:
        path, file, folder = stack.pop()
        with open(file, encoding="utf-8") as f:
            text = strip(f.read())
        for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M):
            name = m.group(1)
            for candidate, sub in (
                (os.path.join(folder, name + ".rs"), os.path.join(folder, name)),
                (os.path.join(folder, name, "mod.rs"), os.path.join(folder, name)),
            ):
                if os.path.exists(candidate):
                    files[path + (name,)] = candidate
                    stack.append((path + (name,), candidate, sub))
                    break
    return files


def edges(files, upward=None):
    """File -> the files it names, ancestors left out (with `upward`, a
    list: each (file, ancestor) it names is appended to it)."""
    out = {}
    for path, file in files.items():
        with open(file, encoding="utf-8") as f:
            text = strip(f.read())
        named = []
        for m in USE.finditer(text):
            named += [(m.group(1), p) for p in expand(m.group(2))]
        for m in PATH.finditer(text):
            # `crate::a::{b, c}`: the group's paths come from USE above.
            if not m.group(3):
                named.append((m.group(1), m.group(2)[2:]))
        targets = set()
        for root, rest in named:
            base = {"crate": (), "self": path, "super": path[:-1]}[root]
            idents = [i for i in re.split(r"::", rest) if re.match(r"^[A-Za-z_]\w*$", i)]
            while idents and idents[0] == "super":
                base, idents = base[:-1], idents[1:]
            full = base + tuple(idents)
            for n in range(len(full), -1, -1):
                if full[:n] in files:
                    target = full[:n]
                    break
            if target != path and target != path[: len(target)]:
                targets.add(files[target])
            elif upward is not None and target and target != path:
                upward.append((file, files[target]))
        out[file] = targets
    return out


def cycles(graph):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward_imports(folder, top):
    """Every (file, ancestor) of a file under `folder` naming an ancestor."""
    found = set()
    for crate in sorted(os.listdir(top)):
        for root, base in crate_roots(os.path.join(top, crate)):
            ups = []
            edges(modules(root, base), ups)
            prefix = os.path.normpath(folder) + os.sep
            found |= {u for u in ups if os.path.normpath(u[0]).startswith(prefix)}
    return sorted(found)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--upward":
        top = sys.argv[3] if len(sys.argv) > 3 else "crates"
        ups = upward_imports(sys.argv[2], top)
        print(len(ups))
        for file, ancestor in ups:
            print(f"upward: {file} -> {ancestor}")
        return 1 if ups else 0
    top = sys.argv[1] if len(sys.argv) > 1 else "crates"
    found = []
    for crate in sorted(os.listdir(top)):
        for root, base in crate_roots(os.path.join(top, crate)):
            found += cycles(edges(modules(root, base)))
    print(len(found))
    for component in found:
        print("cycle: " + " <-> ".join(component))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
