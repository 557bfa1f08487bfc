#!/usr/bin/env python3
"""Lists the Rust functions longer than a limit, and counts them.

Usage: hack/function-lengths.py [--max N] DIR...   (default: --max 60)

A function's length is its lines from the line of `fn` to the line of its
closing brace, its signature included and its doc comment not. Every `.rs`
file below each DIR is read, test files and `mod tests` included: a long
test is as hard to read as a long pass. Braces inside string literals (raw
strings too), character literals and comments are passed over; a `fn`
without a body (a trait's declaration) counts nothing.

Prints `LINES PATH:LINE NAME` per function over the limit, longest first,
then `N functions over M lines`, and exits 1 when N is not 0 (`make lint`).

Why a script: clippy's `too_many_lines` counts code lines only (not the
signature, comments or blank lines a reader scrolls past) and sees no test
code unless every target is linted; this count is the one docs/ARCHITECTURE.md
states.
"""

import os
import re
import sys

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


def code_chars(text):
    """Yields (index, char) of `text` outside strings, chars and comments."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            continue
        raw = re.match(r'b?r(#*)"', text[i : i + 40])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + raw.group(1)
            j = text.find(close, i + raw.end())
            i = n if j < 0 else j + len(close)
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{7f}'), not a lifetime ('a).
            lit = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i : i + 12])
            if lit:
                i += lit.end()
                continue
        yield i, c
        i += 1


def functions(text):
    """Yields (name, first line, last line) of each function with a body."""
    line_of = [0] * (len(text) + 1)
    line = 1
    for k, ch in enumerate(text):
        line_of[k] = line
        if ch == "\n":
            line += 1
    line_of[len(text)] = line
    masked = [" "] * len(text)
    for k, ch in code_chars(text):
        masked[k] = ch
    for k, ch in enumerate(text):
        if ch == "\n":
            masked[k] = "\n"
    masked = "".join(masked)
    for m in FN.finditer(masked):
        depth, k = 0, m.end()
        # The body starts at the first `{` outside parentheses and brackets;
        # a `;` before it means no body.
        parens = 0
        while k < len(masked):
            ch = masked[k]
            if ch in "([":
                parens += 1
            elif ch in ")]":
                parens -= 1
            elif ch == ";" and parens == 0:
                break
            elif ch == "{" and parens == 0:
                break
            k += 1
        if k >= len(masked) or masked[k] != "{":
            continue
        while k < len(masked):
            if masked[k] == "{":
                depth += 1
            elif masked[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        yield m.group(1), line_of[m.start()], line_of[min(k, len(text))]


def main():
    args = sys.argv[1:]
    limit = 60
    if args[:1] == ["--max"]:
        limit, args = int(args[1]), args[2:]
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    long = []
    for top in args:
        for root, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for fn, first, last in functions(text):
                    lines = last - first + 1
                    if lines > limit:
                        long.append((lines, f"{path}:{first}", fn))
    for lines, where, fn in sorted(long, key=lambda r: (-r[0], r[1])):
        print(f"{lines} {where} {fn}")
    print(f"{len(long)} functions over {limit} lines")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
