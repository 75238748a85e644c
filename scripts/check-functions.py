#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The function-length rule of user/ and inject/, checked.

Functions read as the steps of their job: none is over LIMIT lines.
A function is measured from the line holding its opening '{' to the
line holding the matching '}', both counted (the header above it is
not). Braces are matched by nesting, not by column:

  - braces inside comments, strings and character constants are
    skipped, and so are preprocessor directives, continuation lines
    included (a multi-line #define's braces are the macro's);
  - the branches of an #if/#elif/#else/#endif each start from the
    nesting the #if had, and the first branch's nesting carries on
    after #endif, so branches that open or close a brace each are
    counted once.

A '{' at the top level opens a function when the text before it (since
the last top-level ';', '}' or preprocessor line) names one: an
identifier followed by a parameter list, and no '=' (an initializer) in
between. Headers may span lines, carry static/inline/attributes, put the
return type on a line of its own, or end with the '{'.

Usage: check-functions.py [LIMIT]   (default 150; run from anywhere)
Prints "FILE:LINE NAME N lines" for each function over LIMIT (LINE: the
line of its '{'), longest first, and exits 1 if there is any; exits 0
silently otherwise, 2 on a bad argument.
"""
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 150

NAME = re.compile(r"([A-Za-z_]\w*)\s*$")
DIRECTIVE = re.compile(r"\s*#\s*(\w*)")
KEYWORDS = ("if", "while", "for", "switch", "sizeof", "return", "_Alignof",
            "__typeof__", "typeof", "_Static_assert")


def files():
    """Every .c file under user/ (recursively) and directly in inject/."""
    out = []
    for dirpath, dirnames, names in os.walk(os.path.join(TOP, "user")):
        dirnames.sort()
        out += [os.path.join(dirpath, n) for n in sorted(names)
                if n.endswith(".c")]
    inject = os.path.join(TOP, "inject")
    if os.path.isdir(inject):
        out += [os.path.join(inject, n) for n in sorted(os.listdir(inject))
                if n.endswith(".c")]
    return out


def blank(s):
    """s with everything but newlines turned to spaces."""
    return re.sub(r"[^\n]", " ", s)


def skip_literal(text, i):
    """The index past the string or character constant opening at i (an
    unterminated one ends at the end of its line)."""
    q, j, n = text[i], i + 1, len(text)
    while j < n and text[j] != q and text[j] != "\n":
        j += 2 if text[j] == "\\" and j + 1 < n else 1
    return j + 1 if j < n and text[j] == q else min(j, n)


def skip_comment(text, i):
    """The index past the comment opening at i ('/*' or '//')."""
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    end = text.find("*/", i + 2)
    return len(text) if end < 0 else end + 2


def blank_out(text):
    """The text with comments, strings, character constants blanked to
    spaces (newlines kept, so that line and column numbers hold), and
    each preprocessor directive reduced to its '#' and name on its first
    line, the rest of it (continuation lines too) blanked."""
    out = []
    i, n = 0, len(text)
    line_start = True    # only blanks since the last newline
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # To the first newline that is neither escaped nor inside a
            # comment.
            j = i
            while j < n and text[j] != "\n":
                if text.startswith("/*", j) or text.startswith("//", j):
                    j = skip_comment(text, j)
                elif text[j] in "\"'":
                    j = skip_literal(text, j)
                elif text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                else:
                    j += 1
            m = DIRECTIVE.match(text, i)
            out.append(text[i:m.end()] + blank(text[m.end():j]))
            i = j
            continue
        if text.startswith("/*", i) or text.startswith("//", i):
            end = skip_comment(text, i)
            out.append(blank(text[i:end]))
            i = end
            continue
        if c in "\"'":
            end = skip_literal(text, i)
            closed = end - 1 > i and text[end - 1] == c
            out.append(c + blank(text[i + 1:end - 1]) + c if closed
                       else c + blank(text[i + 1:end]))
            line_start = False
            i = end
            continue
        out.append(c)
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        i += 1
    return "".join(out)


def function_name(header):
    """The name a function header declares, or None when the header is
    not a function's (an initializer, a struct, nothing)."""
    header = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", header, flags=re.S)
    if "=" in header or "(" not in header:
        return None
    # The parameter list is the last top-level (...) group; the name is
    # the identifier right before it.
    depth, close = 0, None
    for k in range(len(header) - 1, -1, -1):
        ch = header[k]
        if ch == ")":
            if depth == 0 and close is None:
                close = k
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0 and close is not None:
                m = NAME.search(header[:k])
                if not m or m.group(1) in KEYWORDS:
                    return None
                return m.group(1)
    return None


def functions(path):
    """(line, name, length) of each function defined in path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = blank_out(f.read()).split("\n")
    found = []
    depth = 0
    header = []          # top-level text since the last ';', '}' or '#'
    start = name = None  # the function now open, if any
    conds = []           # per open #if: [depth at #if, depth after branch 1]
    for lineno, line in enumerate(lines, 1):
        d = DIRECTIVE.match(line)
        if d:
            kw = d.group(1)
            if kw in ("if", "ifdef", "ifndef"):
                conds.append([depth, None])
            elif kw in ("elif", "else") and conds:
                if conds[-1][1] is None:
                    conds[-1][1] = depth
                depth = conds[-1][0]
            elif kw == "endif" and conds:
                at_if, after_first = conds.pop()
                if after_first is not None:
                    depth = after_first
            if depth == 0:
                header = []
            continue
        for ch in line:
            if ch == "{":
                if depth == 0:
                    name = function_name("".join(header))
                    start = lineno
                    header = []
                depth += 1
            elif ch == "}":
                depth = max(depth - 1, 0)
                if depth == 0:
                    if name is not None:
                        found.append((start, name, lineno - start + 1))
                    name = None
                    header = []
            elif depth == 0:
                if ch == ";":
                    header = []
                else:
                    header.append(ch)
        if depth == 0:
            header.append("\n")
    return found


def main():
    limit = LIMIT
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and not sys.argv[1].isdigit()):
        sys.stderr.write("usage: check-functions.py [LIMIT]\n")
        return 2
    if len(sys.argv) == 2:
        limit = int(sys.argv[1])
    long = []
    for path in files():
        rel = os.path.relpath(path, TOP)
        for line, name, n in functions(path):
            if n > limit:
                long.append((n, rel, line, name))
    long.sort(key=lambda r: (-r[0], r[1], r[2]))
    for n, rel, line, name in long:
        print(f"{rel}:{line} {name} {n} lines")
    if long:
        print(f"check-functions: {len(long)} function(s) over {limit} lines: split them "
              "into the steps of their job")
        print("functions: 0 passed, 1 failed")
        return 1
    print(f"check-functions: no function in user/ or inject/ over {limit} lines")
    print("functions: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
