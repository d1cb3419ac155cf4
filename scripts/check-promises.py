#!/usr/bin/env python3
"""Checks that every promise of the documentation names checks that exist.

    scripts/check-promises.py          check every file (exits non-zero on a problem)
    scripts/check-promises.py --list   print each named check and where it is named

Files: docs/GUARANTEES.md, docs/PARTITION.md, docs/SEQUENCE_END.md, docs/SECURITY.md,
cli/README.md, zklock-test/README.md, and the fault tables in the rustdoc of
zklock-test/src/link.rs and zklock-test/src/zk/ensemble.rs (`///` lines).

A check is named in backticks, anywhere in those files:

- `path/to/file.rs::function`: a test. The file must exist (from the repository's root) and
  define `fn function` under a `#[test]` attribute.
- `invariant:WORDS`: one of the simulator's invariants, named by its violation. WORDS must
  appear in a string literal of `sim/src/` that a violation reports (it follows `violation(`
  or `Err(`), as the source writes it, `{...}` placeholders included. A label alone (`A1`,
  `L2`, ...) names the violation whose message begins with `A1:`.

Every table of those files has a column "checked by", and every row of it names a check or
says "not checked". Every line that begins with "Checked by:" (with what follows it up to a
blank line, or up to the end of its list item) names a check or says "not checked".

Each problem is one line naming the file, the line and the row or sentence; the exit status is
non-zero if there is any.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = [
    "docs/GUARANTEES.md",
    "docs/PARTITION.md",
    "docs/SEQUENCE_END.md",
    "docs/SECURITY.md",
    "cli/README.md",
    "zklock-test/README.md",
]
# Rust files whose `///` documentation holds a promise table.
RUSTDOC = ["zklock-test/src/link.rs", "zklock-test/src/zk/ensemble.rs"]
SIM = "sim/src"

SPAN = re.compile(r"`([^`\n]+)`")
TEST_REF = re.compile(r"^([\w./-]+\.rs)::([A-Za-z_][A-Za-z0-9_]*)$")
LABEL = re.compile(r"^[A-Z][0-9]+$")
NOT_CHECKED = re.compile(r"\bnot checked\b", re.I)
# A "Checked by:" that begins a line (a mention of it inside a sentence is none).
CHECKED_BY = re.compile(r"^\s*(?:- )?checked by:", re.I)
# A Rust string literal (no raw strings in sim/src's messages).
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def doc_lines(rel):
    """The lines of a document: a Markdown file as it is, a Rust file's `///` text."""
    lines = read(rel).split("\n")
    if not rel.endswith(".rs"):
        return lines
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith("///"):
            out.append(s[3:][1:] if s[3:4] == " " else s[3:])
        else:
            out.append("")  # keeps line numbers; ends paragraphs and tables
    return out


def sim_messages():
    """Every string literal of sim/src that a violation reports, continuation lines joined."""
    messages = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, SIM)):
        for name in files:
            if not name.endswith(".rs"):
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                text = f.read()
            for m in STRING.finditer(text):
                before = text[max(0, m.start() - 160) : m.start()]
                if "violation(" not in before and "Err(" not in before:
                    continue
                messages.append(re.sub(r"\\\n\s*", "", m.group(1)))
    return messages


class Tests:
    """Which `fn`s under a `#[test]` each file defines (read once per file)."""

    def __init__(self):
        self.files = {}

    def defined(self, rel):
        if rel not in self.files:
            path = os.path.join(ROOT, rel)
            if not os.path.isfile(path):
                self.files[rel] = None
            else:
                lines = read(rel).split("\n")
                names = set()
                for i, line in enumerate(lines):
                    m = re.match(r"\s*(?:pub(?:\([a-z]+\))? )?(?:async )?fn ([A-Za-z_]\w*)", line)
                    if not m:
                        continue
                    j = i - 1
                    while j >= 0 and lines[j].strip().startswith(("#[", "///", "//")):
                        if re.match(r"\s*#\[(?:[\w:]+::)?test\b", lines[j]):
                            names.add(m.group(1))
                            break
                        j -= 1
                self.files[rel] = names
        return self.files[rel]


def where(rel, lineno, context):
    short = context.strip()
    if len(short) > 70:
        short = short[:67] + "..."
    return f"{rel}:{lineno} ({short})"


def check_refs(rel, lines, tests, messages, problems, listing):
    """Every named check in the file exists. Returns how many were named."""
    count = 0
    context = ""
    blank = True
    for n, line in enumerate(lines, 1):
        # The row, list item or paragraph a check is named in: what the
        # message names.
        if line.startswith("#") or line.startswith("|") or line.lstrip().startswith("- "):
            context = line
        elif line.strip() and blank:
            context = line
        blank = not line.strip()
        for m in SPAN.finditer(line):
            span = m.group(1).strip()
            t = TEST_REF.match(span)
            if t:
                count += 1
                listing.append(f"{rel}:{n}: test {span}")
                file, fn = t.groups()
                names = tests.defined(file)
                if names is None:
                    problems.append(f"{where(rel, n, context)}: no file {file} (named in `{span}`)")
                elif fn not in names:
                    problems.append(f"{where(rel, n, context)}: no #[test] fn {fn} in {file}")
            elif span.startswith("invariant:") and span != "invariant:":
                # (`invariant:` alone is the notation itself, as the docs explain it.)
                count += 1
                words = span[len("invariant:") :].strip()
                listing.append(f"{rel}:{n}: invariant {words}")
                if LABEL.match(words):
                    found = any(msg.startswith(words + ":") for msg in messages)
                else:
                    found = bool(words) and any(words in msg for msg in messages)
                if not found:
                    problems.append(
                        f"{where(rel, n, context)}: no violation of {SIM}/ says {words!r}"
                    )
    return count


def names_a_check(text):
    return any(
        TEST_REF.match(s.strip()) or (s.strip().startswith("invariant:") and s.strip() != "invariant:")
        for s in SPAN.findall(text)
    ) or bool(NOT_CHECKED.search(text))


def cells(row):
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    # A `|` inside backticks is no cell border.
    parts, cur, code = [], "", False
    for ch in inner:
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def check_tables(rel, lines, problems):
    """Every table has a "checked by" column, and each row names a check there."""
    rows = 0
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("|"):
            i += 1
            continue
        start = i
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            i += 1
        table = lines[start:i]
        header = [c.lower() for c in cells(table[0])]
        if "checked by" not in header:
            problems.append(f"{where(rel, start + 1, table[0])}: a table with no 'checked by' column")
            continue
        col = header.index("checked by")
        for k, row in enumerate(table[2:], start + 3):
            rows += 1
            c = cells(row)
            first = c[0] if c else row
            if col >= len(c) or not names_a_check(c[col]):
                problems.append(
                    f"{where(rel, k, first)}: its 'checked by' names no check and does not say 'not checked'"
                )
    return rows


def check_lines(rel, lines, problems):
    """Every "Checked by:" names a check or says "not checked"."""
    blocks = 0
    for n, line in enumerate(lines):
        m = CHECKED_BY.search(line)
        if not m or line.lstrip().startswith("|"):
            continue
        blocks += 1
        indent = len(line) - len(line.lstrip())
        text = line[m.end() :]
        for nxt in lines[n + 1 :]:
            if not nxt.strip() or CHECKED_BY.search(nxt) or nxt.lstrip().startswith(("#", "|")):
                break
            if indent and len(nxt) - len(nxt.lstrip()) < indent:
                break
            text += "\n" + nxt
        if not names_a_check(text):
            problems.append(
                f"{where(rel, n + 1, line)}: 'Checked by:' names no check and does not say 'not checked'"
            )
    return blocks


def main(argv):
    listing_wanted = "--list" in argv
    problems, listing = [], []
    tests = Tests()
    messages = sim_messages()
    refs = rows = blocks = gaps = 0
    for rel in DOCS + RUSTDOC:
        if not os.path.isfile(os.path.join(ROOT, rel)):
            problems.append(f"{rel}: missing")
            continue
        lines = doc_lines(rel)
        refs += check_refs(rel, lines, tests, messages, problems, listing)
        rows += check_tables(rel, lines, problems)
        blocks += check_lines(rel, lines, problems)
        gaps += sum(len(NOT_CHECKED.findall(line)) for line in lines)
    if listing_wanted:
        print("\n".join(listing))
    for p in problems:
        print(p, file=sys.stderr)
    print(
        f"check-promises: {refs} named checks, {rows} table rows, {blocks} 'Checked by:' lines, "
        f"{gaps} 'not checked'; {len(problems)} problems",
        file=sys.stderr,
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
