#!/usr/bin/env python3
"""Checks every shell block of the documentation, so that a pasted block works.

    scripts/check-doc-blocks.py          check every file (scripts/test.sh and .ci/fast run it)
    scripts/check-doc-blocks.py --list   print each block and what is done with it

Files: README.md, docs/*.md, bench/README.md, cli/README.md. Blocks: ```sh, ```bash,
```shell and ```console (in a console block only the `$ ` lines are commands).

A block preceded by `<!-- doc-block: run -->` is executed from the repository root with
`bash -e -o pipefail`, as a reader would paste it (cheap, safe blocks only). Every other block
is checked, not run; in README.md and docs/ it must say why with
`<!-- doc-block: check (why it is not run) -->`. Run or not, every command line of every block
is checked statically:

- no prompt (`$ `, `% `) in an sh/bash block, no placeholder (`<seed>`, `...`);
- `cd DIR` names a directory that exists from where the block stands (tracked line by line,
  so a later line that assumes the old directory fails);
- `./path` and `python3 path` name an executable file there, and each `--flag` given to it
  appears in its text;
- `cargo ...`: `-p`/`--package` a workspace package, `--test` a test target of it (and a test
  filter after `--` a function in that target), `--example`/`--bin` an existing one,
  `--features` a feature it declares, `--manifest-path`/`--path` an existing manifest,
  `cargo fuzz run T` a target in fuzz/Cargo.toml, `cargo install X` a crate of this workspace
  or one of the tools the docs tell you to install; other flags from a known list;
- `zklock ...`: a subcommand and flags the CLI parses (cli/src/args.rs);
- `VAR=value` and `export VAR=value`: VAR is read somewhere in the code or scripts (or is one
  of cargo's and rustc's own variables).

README.md's ```rust blocks must appear, line for line, in the crate doc of src/lib.rs, whose
doc test (`cargo test --doc`) compiles them.

It first checks itself on lines it must refuse and lines it must pass (SELF_TEST).
Exits non-zero with one line per problem.
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["README.md", "docs/*.md", "bench/README.md", "cli/README.md"]
# Files whose blocks must carry a marker saying whether they run.
MARKED = ["README.md", "docs/"]
SHELL = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"<!--\s*doc-block:\s*(run|check)\b\s*(.*?)\s*-->")
RUN_TIMEOUT = 900

# Variables read by cargo, rustc or rustdoc themselves, not by this code.
TOOL_VARS = {"RUSTC_BOOTSTRAP", "RUSTDOCFLAGS", "RUSTFLAGS", "CARGO_TARGET_DIR",
             "CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS", "RUST_LOG", "RUST_BACKTRACE",
             "CARGO_HOME"}
# Tools the docs tell you to install with `cargo install`.
TOOLS = {"cargo-fuzz", "cargo-mutants", "cargo-semver-checks"}
# Commands with nothing to check beyond their arguments' shape.
HARMLESS = {"echo", "mkdir", "true", "ls", "cat", "date", "nproc", "uname", "rustc",
            "java", "python3", "git", "rustup", "grep", "sort", "uniq",
             "head", "wc"}
CARGO_FLAGS = {
    "--workspace", "--all-targets", "--all-features", "--no-default-features", "--doc",
    "--lib", "--bins", "--tests", "--examples", "--release", "--no-deps", "--quiet", "-q",
    "--locked", "--offline", "--all", "--check", "--dry-run", "--allow-dirty", "--no-run",
    "--verbose", "-v",
}
CARGO_SUBCOMMANDS = {"test", "build", "check", "clippy", "fmt", "doc", "run", "install",
                     "fuzz", "publish", "update", "bench", "rustdoc", "mutants",
                     "semver-checks", "tree", "metadata"}
TEST_BIN_FLAGS = {"--nocapture", "--exact", "--ignored", "--include-ignored", "--list",
                  "--show-output"}


class Problems:
    def __init__(self):
        self.items = []

    def add(self, where, what):
        self.items.append(f"{where}: {what}")


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def load_toml(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def workspace_packages():
    """name -> directory, for the root workspace and the crates with their own workspace."""
    packages = {}
    root = load_toml(os.path.join(ROOT, "Cargo.toml"))
    dirs = [ROOT] + [os.path.join(ROOT, m) for m in root["workspace"]["members"]]
    dirs += [os.path.join(ROOT, d) for d in ("fuzz", "bench/zkrs", "bench/minimal",
                                              "bench/skeleton")]
    for d in dirs:
        manifest = os.path.join(d, "Cargo.toml")
        if os.path.exists(manifest):
            packages[load_toml(manifest)["package"]["name"]] = d
    return packages


PACKAGES = workspace_packages()


def source_text():
    """Every file a variable could be read in, as one string (read once)."""
    parts = []
    for pattern in ("src/**/*.rs", "tests/**/*.rs", "cli/**/*.rs", "bench/**/*.rs",
                    "testkit/**/*.rs", "jute/**/*.rs", "examples/**/*.rs", "fuzz/**/*.rs",
                    "scripts/*", ".ci/*", "fuzz/*.sh", "bench/*.py", "testkit/**/*.py"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            if "/target/" in path or os.path.isdir(path):
                continue
            try:
                parts.append(read(path))
            except UnicodeDecodeError:
                pass
    return "\n".join(parts)


SOURCES = source_text()


def var_is_read(name):
    if name in TOOL_VARS:
        return True
    return (f'"{name}"' in SOURCES or f"${name}" in SOURCES or "${" + name in SOURCES
            or f"environ.get(\"{name}\"" in SOURCES)


def cli_flags():
    text = read(os.path.join(ROOT, "cli/src/args.rs"))
    longs = set(re.findall(r'Long\("([a-z0-9-]+)"\)', text))
    shorts = set(re.findall(r"Short\('(.)'\)", text))
    subs = set(re.findall(r'"([a-z]+)" => Some\(Sub::', text)) | {"help"}
    return longs, shorts, subs


CLI_LONGS, CLI_SHORTS, CLI_SUBS = cli_flags()


def blocks(path):
    """(line number, language, marker, lines) of each fenced block."""
    lines = read(path).split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([A-Za-z0-9_,+-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2).split(",")[0]
        start = i
        marker = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0:
            mk = MARKER.search(lines[j])
            if mk:
                marker = (mk.group(1), mk.group(2))
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        out.append((start + 1, lang, marker, body))
        i += 1
    return out


def commands(lang, body, where, problems):
    """The command lines of a block: continuations joined, prompts refused."""
    logical = []
    pending = ""
    for n, line in enumerate(body):
        if lang == "console":
            if not line.startswith("$ ") and not pending:
                continue  # output
            if line.startswith("$ "):
                line = line[2:]
        elif re.match(r"^\s*[$%] ", line):
            problems.add(f"{where}+{n + 1}", f"a prompt in a {lang} block fails when pasted: {line!r}")
            line = re.sub(r"^\s*[$%] ", "", line)
        if re.search(r"<[a-z][a-z _-]*>|\.\.\.", line.split("#")[0]):
            problems.add(f"{where}+{n + 1}", f"a placeholder fails when pasted: {line!r}")
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append((n + 1, pending + line))
        pending = ""
    if pending:
        problems.add(where, "the block ends inside a continued line")
    return logical


def split_commands(line):
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    tokens = list(lex)
    cmds, cur, skip = [], [], False
    for t in tokens:
        if skip:
            skip = False
            continue
        if t in ("&&", "||", ";", "|", "&"):
            if cur:
                cmds.append(cur)
            cur = []
        elif t in (">", ">>", "<", ">&", "2>", "&>"):
            skip = True  # its target
            if cur and cur[-1].isdigit():
                cur.pop()
        else:
            cur.append(t)
    if cur:
        cmds.append(cur)
    return cmds


def test_target_files(package_dir, name):
    """The files of the test target `name` as Cargo finds it: tests/NAME.rs,
    or tests/NAME/main.rs with the modules beside it."""
    single = os.path.join(package_dir, "tests", f"{name}.rs")
    if os.path.isfile(single):
        return [single]
    folder = os.path.join(package_dir, "tests", name)
    if os.path.isfile(os.path.join(folder, "main.rs")):
        return sorted(glob.glob(os.path.join(folder, "**", "*.rs"), recursive=True))
    return []


def test_functions(path):
    """The functions of `path`, each also with its module path as the test
    harness names it (tests/NAME/a/b.rs: `a::b::f`; a/mod.rs: `a::f`), so
    that a filter may name a module."""
    names = set(re.findall(r"fn\s+([a-z0-9_]+)\s*\(", read(path)))
    parts = os.path.normpath(path).split(os.sep)
    if "tests" in parts:
        # The module path below the target's folder, tests/NAME/.
        inner = parts[len(parts) - parts[::-1].index("tests") + 1:]
        if inner and inner[-1] in ("main.rs", "mod.rs"):
            inner = inner[:-1]
        elif inner:
            inner[-1] = inner[-1][:-len(".rs")]
        prefix = "".join(f"{m}::" for m in inner)
        names |= {prefix + n for n in names}
    return names


def check_cargo(args, cwd, where, problems):
    if args and args[0].startswith("+"):
        args = args[1:]  # a toolchain: the MSRV lane says what happens without it
    if not args:
        problems.add(where, "bare cargo")
        return
    sub, rest = args[0], args[1:]
    if sub not in CARGO_SUBCOMMANDS:
        problems.add(where, f"cargo {sub}: not a subcommand these docs use")
        return
    if sub == "fuzz":
        return check_cargo_fuzz(rest, cwd, where, problems)
    if sub in ("mutants", "semver-checks"):
        return  # external tools; their lanes check what they can
    if "--" in rest:
        i = rest.index("--")
        rest, after = rest[:i], rest[i + 1:]
    else:
        after = []
    packages, tests, positional, i = [], [], [], 0
    manifest_dir = cwd
    while i < len(rest):
        a = rest[i]
        val = rest[i + 1] if i + 1 < len(rest) else None
        if a in ("-p", "--package"):
            if val not in PACKAGES:
                problems.add(where, f"cargo -p {val}: no such package")
            else:
                packages.append(val)
            i += 2
        elif a == "--manifest-path":
            full = os.path.join(cwd, val or "")
            if not os.path.isfile(full):
                problems.add(where, f"--manifest-path {val}: no such file")
            manifest_dir = os.path.dirname(full)
            i += 2
        elif a == "--path" and sub == "install":
            if not os.path.isfile(os.path.join(cwd, val or "", "Cargo.toml")):
                problems.add(where, f"cargo install --path {val}: no Cargo.toml there")
            i += 2
        elif a in ("--test", "--example", "--bin", "--features", "--profile", "--target-dir"):
            if a == "--test":
                tests.append(val)
            elif a == "--example":
                if not (os.path.isfile(os.path.join(ROOT, "examples", f"{val}.rs")) or
                        os.path.isfile(os.path.join(ROOT, "examples", val or "", "main.rs"))):
                    problems.add(where, f"--example {val}: no such example")
            elif a == "--bin":
                if not any(f'name = "{val}"' in read(os.path.join(d, "Cargo.toml")) or
                           os.path.isfile(os.path.join(d, "src/bin", f"{val}.rs"))
                           for d in PACKAGES.values()):
                    problems.add(where, f"--bin {val}: no such binary")
            elif a == "--features":
                for f in (val or "").replace(",", " ").split():
                    if not any(f in load_toml(os.path.join(d, "Cargo.toml")).get("features", {})
                               for d in PACKAGES.values()):
                        problems.add(where, f"--features {f}: no package declares it")
            i += 2
        elif a in CARGO_FLAGS:
            i += 1
        elif sub == "test" and not a.startswith("-"):
            positional.append(a)  # a test name filter
            i += 1
        elif sub == "install" and not a.startswith("-"):
            if a not in TOOLS and a not in PACKAGES:
                problems.add(where, f"cargo install {a}: neither a crate here nor a known tool")
            i += 1
        else:
            problems.add(where, f"cargo {sub}: unknown argument {a!r}")
            i += 1
    if sub == "test":
        dirs = [PACKAGES[p] for p in packages] or [manifest_dir]
        files = []
        for t in tests:
            found = [f for d in dirs for f in test_target_files(d, t)]
            if not found:
                problems.add(where, f"cargo test --test {t}: no tests/{t}.rs nor "
                                    f"tests/{t}/main.rs in {[rel(d) or '.' for d in dirs]}")
            files += found
        filters = positional + [a for a in after if not a.startswith("-")]
        if not tests and "--lib" in rest:
            files = [f for d in dirs for f in glob.glob(os.path.join(d, "src/**/*.rs"),
                                                        recursive=True)]
        for a in after:
            if a.startswith("-") and a.split("=")[0] not in TEST_BIN_FLAGS | {"--test-threads"}:
                problems.add(where, f"test binary flag {a!r} unknown")
        if filters and files:
            names = set().union(*(test_functions(f) for f in files))
            for flt in filters:
                if not any(flt in n for n in names):
                    shown = [rel(f) for f in files]
                    shown = shown if len(shown) <= 3 else f"{len(shown)} files"
                    problems.add(where, f"test filter {flt!r} matches no function in {shown}")
    elif sub == "clippy":
        if after and after not in (["-D", "warnings"],):
            problems.add(where, f"cargo clippy -- {' '.join(after)}: unexpected")


def check_cargo_fuzz(args, cwd, where, problems):
    fuzz_dir = cwd if os.path.basename(cwd) == "fuzz" else os.path.join(cwd, "fuzz")
    manifest = os.path.join(fuzz_dir, "Cargo.toml")
    if not os.path.isfile(manifest):
        problems.add(where, f"cargo fuzz: no fuzz/Cargo.toml from {rel(cwd) or '.'}")
        return
    targets = {b["name"] for b in load_toml(manifest).get("bin", [])}
    if not args or args[0] not in ("run", "build", "list", "coverage"):
        problems.add(where, f"cargo fuzz {args[:1]}: not a subcommand these docs use")
        return
    if args[0] == "run":
        if len(args) < 2 or args[1] not in targets:
            problems.add(where, f"cargo fuzz run {args[1:2]}: not a target of fuzz/Cargo.toml")
        for d in args[2:]:
            if d == "--":
                break
            if d.startswith("seeds/") and not os.path.isdir(os.path.join(fuzz_dir, d)):
                problems.add(where, f"cargo fuzz run: no committed seed directory {d}")


def check_script(prog, args, cwd, where, problems):
    path = os.path.normpath(os.path.join(cwd, prog))
    if not os.path.isfile(path):
        problems.add(where, f"{prog}: no such file from {rel(cwd) or '.'}")
        return
    if not os.access(path, os.X_OK):
        problems.add(where, f"{prog}: not executable")
    text = read(path)
    for a in args:
        if a.startswith("--") and a.split("=")[0] not in text:
            problems.add(where, f"{prog}: never mentions the flag {a}")
    if rel(path) == "scripts/inject-bugs.py":
        names = set(re.findall(r'^\s*\("([a-z0-9-]+)",\s*$', text, re.M))
        for a in args:
            if not a.startswith("-") and a not in names:
                problems.add(where, f"inject-bugs.py: no bug named {a}")


def check_zklock(args, where, problems):
    sub = next((a for a in args if a in CLI_SUBS), None)
    if sub is None and not any(a in ("-h", "--help", "--version") for a in args):
        problems.add(where, f"zklock {' '.join(args)}: no subcommand")
    for a in args:
        if a == "--":
            break
        if a.startswith("--") and a[2:].split("=")[0] not in CLI_LONGS:
            problems.add(where, f"zklock: no option {a}")
        elif re.match(r"^-[A-Za-z]$", a) and a[1] not in CLI_SHORTS:
            problems.add(where, f"zklock: no option {a}")


def check_command(cmd, cwd, where, problems):
    """Returns the directory the next command runs in."""
    while cmd and re.match(r"^[A-Z_][A-Z0-9_]*=", cmd[0]):
        name = cmd[0].split("=")[0]
        if not var_is_read(name):
            problems.add(where, f"{name} is read by nothing in this repository")
        cmd = cmd[1:]
    if not cmd:
        return cwd
    prog, args = cmd[0], cmd[1:]
    if prog == "export":
        for a in args:
            name = a.split("=")[0]
            if not var_is_read(name):
                problems.add(where, f"{name} is read by nothing in this repository")
        return cwd
    if prog == "cd":
        target = os.path.normpath(os.path.join(cwd, args[0] if args else ROOT))
        if not os.path.isdir(target):
            problems.add(where, f"cd {args[0] if args else ''}: no such directory from "
                                f"{rel(cwd) or '.'}")
        return target
    if prog == "cargo":
        check_cargo(args, cwd, where, problems)
    elif prog == "zklock":
        check_zklock(args, where, problems)
    elif prog in ("python3", "bash") and args and "/" in args[0]:
        check_script(args[0], args[1:], cwd, where, problems)
    elif "/" in prog:
        check_script(prog, args, cwd, where, problems)
    elif prog not in HARMLESS:
        problems.add(where, f"no rule for {prog!r}: teach scripts/check-doc-blocks.py, "
                            "or mark the block `run`")
    return cwd


def check_rust_in_readme(path, lang, body, where, problems):
    lib = [re.sub(r"^//! ?", "", line) for line in
           read(os.path.join(ROOT, "src/lib.rs")).split("\n") if line.startswith("//!")]
    pos = 0
    for line in body:
        if not line.strip():
            continue
        try:
            pos = lib.index(line, pos) + 1
        except ValueError:
            problems.add(where, f"rust line not in src/lib.rs's doc test (in order): {line!r}")
            return


# The checker checked: lines it must refuse, and lines it must let pass.
SELF_TEST = [
    ("cargo test --test nosuch", False),
    ("cargo test --test simulation -- nosuchfn", False),
    ("cargo test --test simulation -- replay --nocapture", True),
    ("NO_SUCH_VARIABLE_ANYWHERE=1 cargo test --test simulation", False),
    ("./scripts/public-api.sh --nosuch", False),
    ("./scripts/public-api.sh --update", True),
    ("cd fuzz && ./fuzz/run-all.sh", False),
    ("cd fuzz && ./run-all.sh 60 frames", True),
    ("zklock exec --nosuch /x -- true", False),
    ("zklock -c a:1 status --json /x", True),
    ("cargo fuzz run nosuch", False),
    ("cargo test -p nosuch", False),
    ("scripts/inject-bugs.py nosuch-bug", False),
    ("cargo test -p zklock --lib nosuchname", False),
    ("$ cargo test", False),
    ("SIM_SEED=<seed> cargo test --test simulation -- replay", False),
    ("frobnicate", False),
]


def self_test():
    failed = 0
    for line, ok in SELF_TEST:
        p = Problems()
        cwd = ROOT
        for _, logical in commands("sh", [line], "self-test", p):
            for cmd in split_commands(logical):
                cwd = check_command(cmd, cwd, "self-test", p)
        if (not p.items) != ok:
            failed += 1
            print(f"doc-blocks self-test: {line!r} should {'pass' if ok else 'fail'}: "
                  f"{p.items}", file=sys.stderr)
    print(f"doc-blocks self-test: {len(SELF_TEST) - failed}/{len(SELF_TEST)} as expected",
          file=sys.stderr)
    return failed == 0


def main():
    if not self_test():
        sys.exit(1)
    listing = "--list" in sys.argv[1:]
    problems = Problems()
    ran = checked = 0
    paths = sorted({p for pat in FILES for p in glob.glob(os.path.join(ROOT, pat))})
    for path in paths:
        name = rel(path)
        for line_no, lang, marker, body in blocks(path):
            where = f"{name}:{line_no}"
            if name == "README.md" and lang == "rust":
                check_rust_in_readme(path, lang, body, where, problems)
                continue
            if lang not in SHELL:
                continue
            must_mark = any(name == m or name.startswith(m) for m in MARKED)
            if marker is None and must_mark:
                problems.add(where, "no `<!-- doc-block: run -->` or "
                                    "`<!-- doc-block: check (why) -->` before the block")
            mode, why = marker or ("check", "(no marker)")
            if mode == "check" and not why:
                problems.add(where, "a checked block must say why it is not run")
            cwd = ROOT
            for n, line in commands(lang, body, where, problems):
                for cmd in split_commands(line):
                    cwd = check_command(cmd, cwd, f"{where}+{n}", problems)
            if listing:
                print(f"{where} [{mode}{' ' + why if why else ''}]")
                for line in body:
                    print(f"    {line}")
            if mode == "run":
                ran += 1
                text = "\n".join(l[2:] if lang == "console" and l.startswith("$ ") else l
                                 for l in body
                                 if lang != "console" or l.startswith("$ "))
                print(f"doc-blocks: running {where}", file=sys.stderr)
                try:
                    rc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=ROOT,
                                        timeout=RUN_TIMEOUT).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
                if rc != 0:
                    problems.add(where, f"the block failed when run (exit {rc})")
            else:
                checked += 1
    for p in problems.items:
        print(f"doc-blocks: {p}", file=sys.stderr)
    print(f"doc-blocks: {ran} blocks run, {checked} checked without running, "
          f"{len(problems.items)} problems", file=sys.stderr)
    sys.exit(1 if problems.items else 0)


if __name__ == "__main__":
    main()
