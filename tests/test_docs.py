"""The user documentation stays true: every ```flow block in docs/*.md and README.md is a
whole program that checks without errors, docs/functions.md is the generated reference, and
the keyword list, CLI reference and stdlib reference cover the grammar, the CLI and the stdlib."""
from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from scopeflow.compiler import check_flow
from scopeflow.runtime.spec import split_top_level

DOCS = os.path.join(ROOT, "docs")
MARKDOWN = sorted(glob.glob(os.path.join(DOCS, "*.md"))) + [p for p in [os.path.join(ROOT, "README.md")]
                                                            if os.path.exists(p)]
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


def fenced_blocks(path: str, lang: str) -> list[tuple[int, str]]:
    """(line of the opening fence, dedented text) of every ```lang block (also indented ones in lists)."""
    blocks, inside, keep, start, indent, lines = [], False, False, 0, "", []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            m = FENCE.match(line)
            if not inside and m:
                inside, keep, start, indent, lines = True, m.group(2) == lang, no, m.group(1), []
            elif inside and m and not m.group(2):
                if keep:
                    blocks.append((start, textwrap.dedent("".join(lines))))
                inside = False
            elif inside:
                lines.append(line[len(indent):] if line.startswith(indent) else line)
    return blocks


FLOW_BLOCKS = [(path, line, text) for path in MARKDOWN for line, text in fenced_blocks(path, "flow")]


def _id(block):
    return f"{os.path.relpath(block[0], ROOT)}:{block[1]}"


def test_docs_have_flow_blocks():
    per_file = {os.path.basename(p) for p, _, _ in FLOW_BLOCKS}
    assert {"tutorial.md", "language.md", "stdlib.md"} <= per_file


@pytest.mark.parametrize("block", FLOW_BLOCKS, ids=[_id(b) for b in FLOW_BLOCKS])
def test_flow_block_checks_clean(block):
    """Relative paths resolve against the Markdown file's folder (docs/data/ for docs/*.md).
    Warnings (such as W0001 for a README example's input) are fine, errors are not."""
    path, line, text = block
    result = check_flow(text, f"{os.path.relpath(path, ROOT)}:{line}", os.path.dirname(path))
    assert not result.errors, "\n\n".join(d.render() for d in result.errors) + (
        "\n\nmark fragments as ```text instead of ```flow")
    assert result.plan is not None and result.plan.sinks, "a documented program should have a sink"


def test_functions_md_is_generated_from_the_registry():
    from scopeflow.stdlib.functions import functions_markdown

    with open(os.path.join(DOCS, "functions.md"), encoding="utf-8") as fh:
        assert fh.read() == functions_markdown(), "regenerate it: scopeflow docs > docs/functions.md"


def grammar_keywords() -> set[str]:
    with open(os.path.join(ROOT, "dsl", "flow.lark"), encoding="utf-8") as fh:
        text = re.sub(r"//[^\n]*", "", fh.read())
    return set(re.findall(r'"([a-z_]+)"', text))


def test_language_md_lists_every_keyword_of_the_grammar():
    with open(os.path.join(DOCS, "language.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index("## Keywords"):]
    listed = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    assert set(listed.split()) == grammar_keywords()


def test_language_md_documents_every_operator():
    with open(os.path.join(DOCS, "language.md"), encoding="utf-8") as fh:
        text = fh.read()
    with open(os.path.join(ROOT, "dsl", "flow.lark"), encoding="utf-8") as fh:
        grammar = fh.read()
    ops = re.findall(r"^(\w+)_op:", grammar, re.M)
    assert len(ops) >= 12
    for op in ops:
        assert f"| `{op}" in text, f"operator `{op}` is missing from the operator table of docs/language.md"


def test_cli_md_documents_every_command_and_flag():
    from scopeflow.cli import parser

    with open(os.path.join(DOCS, "cli.md"), encoding="utf-8") as fh:
        text = fh.read()
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    for name, command in sub.choices.items():
        assert name in sections, f"command `{name}` has no section"
        section = sections[name]
        if name in ("compile", "show", "graphalytics"):  # the generated script, `show` and `graphalytics` take `run`'s flags
            section += sections["run"]
        for action in command._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section, f"`scopeflow {name} {flag}` is not in its section of docs/cli.md"
            for choice in action.choices or ():
                if not isinstance(action, argparse._SubParsersAction):
                    assert str(choice) in section, f"`scopeflow {name}`: choice `{choice}` is not documented"
    from scopeflow.runtime.errors import ExitCode

    assert "`scopeflow --version`" in text
    for code in ExitCode:
        assert f"| {int(code)} |" in text, f"exit code {int(code)}"


def stdlib_defs() -> dict[tuple[str, str], str]:
    """(module, def name) -> the comment block right above it, for every stdlib module (two modules may
    define a def of the same name: stdlib:graph's and stdlib:graphalytics' pagerank)."""
    out = {}
    for path in glob.glob(os.path.join(ROOT, "stdlib", "*.flow")):
        module = os.path.basename(path)[:-len(".flow")]
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"def (\w+)\(", line)
            if m:
                j = i
                while j > 0 and lines[j - 1].startswith("#"):
                    j -= 1
                out[module, m.group(1)] = "\n".join(lines[j:i])
    return out


def test_every_stdlib_def_is_documented_in_place_and_in_stdlib_md():
    defs = stdlib_defs()
    assert {"connected_components", "sssp", "pagerank", "kcore", "reachability", "triangle_count",
            "kmeans"} <= {name for _, name in defs}
    with open(os.path.join(DOCS, "stdlib.md"), encoding="utf-8") as fh:
        text = fh.read()
    for (_, name), comment in defs.items():
        for word in ("input", "output", "example"):
            assert word in comment, f"the comment above `def {name}` lacks its {word}"
        assert f"### {name}" in text, f"docs/stdlib.md has no section for `{name}`"


def test_stdlib_comments_state_the_real_input_and_output_schemas():
    """`input` lists every parameter of the def as declared; `output` is the schema the def produces."""
    for path in glob.glob(os.path.join(ROOT, "stdlib", "*.flow")):
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        for (module, name), comment in stdlib_defs().items():
            if module != os.path.basename(path)[:-len(".flow")]:
                continue  # defined in another module
            m = re.search(rf"^def {name}\((.*?)\)\s*{{", source, flags=re.M | re.S)
            params = split_top_level(" ".join(m.group(1).split()))
            block = comment[comment.index("input"):comment.index("output")]
            declared = [" ".join(ln.lstrip("#").replace("input", "", 1).split()) for ln in block.splitlines()]
            for param in params:
                assert any(d.startswith(param) for d in declared), f"`def {name}`: `{param}` not under input"
            stated = re.search(r"output\s+(\([^)]*\))", comment).group(1)
            body = comment[comment.index("example:"):].split("\n", 1)[1]
            program = "\n".join(ln[1:].strip() for ln in body.splitlines() if ln.startswith("#"))
            plan = check_flow(program, f"stdlib example of {name}", os.path.join(ROOT, "examples")).plan
            out = plan.nodes[plan.sinks[0].node].schema
            assert stated == "(" + ", ".join(f"{f.name}: {f.type}" for f in out.fields) + ")", name


def test_stdlib_comment_examples_check_clean():
    """The example in each def's comment is a whole program (given docs/data-like inputs)."""
    for (_, name), comment in stdlib_defs().items():
        body = comment[comment.index("example:"):].split("\n", 1)[1]
        program = "\n".join(ln[1:].strip() for ln in body.splitlines() if ln.startswith("#"))
        result = check_flow(program, f"stdlib example of {name}", os.path.join(ROOT, "examples"))
        assert not result.errors, "\n".join(d.render() for d in result.errors)


def test_relative_links_in_docs_exist():
    for path in glob.glob(os.path.join(DOCS, "*.md")):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert os.path.exists(os.path.join(DOCS, target)), f"{os.path.basename(path)} links to {target}"


# ---- references: the docs are the reference, nothing points outside the repository ---------------

def repository_text_files() -> list[str]:
    out = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "build", "out")]
        out += [os.path.join(folder, n) for n in names
                if n.endswith((".py", ".md", ".flow", ".lark", ".toml")) or n == "Makefile"]
    return out


def test_nothing_cites_the_specification_that_is_not_in_the_repository():
    cited = [f"{os.path.relpath(path, ROOT)}:{no}"
             for path in repository_text_files()
             for no, line in enumerate(open(path, encoding="utf-8"), 1)
             if re.search(r"LANGUAGE\.md|spec(ification)? section", line)]
    assert not cited, f"cite docs/language.md#<section> instead: {cited}"


def test_sections_of_language_md_cited_anywhere_exist():
    with open(os.path.join(DOCS, "language.md"), encoding="utf-8") as fh:
        headings = re.findall(r"^#+ (.+)$", fh.read(), flags=re.M)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    cited = {(os.path.relpath(path, ROOT), anchor)
             for path in repository_text_files()
             for anchor in re.findall(r"language\.md#([\w-]+)", open(path, encoding="utf-8").read())}
    assert len(cited) > 10
    assert not {c for c in cited if c[1] not in anchors}


# ---- the tutorial's kill and resume -----------------------------------------------------------------

def tutorial_kill_block() -> str:
    (block,) = [text for _, text in fenced_blocks(os.path.join(DOCS, "tutorial.md"), "bash") if "kill -9" in text]
    return block


FAKE_SCOPEFLOW = """#!{python}
# Stands in for `scopeflow run` in the tutorial's commands: a run commits a snapshot every second
# (data first, manifest.json last by rename, as runtime/snapshots.py does) for a minute;
# `--resume` says which snapshot it would continue from.
import os, sys, time
args = sys.argv[1:]
if "--resume" not in args:
    with open(os.environ["FAKE_PID_FILE"], "w") as fh:
        fh.write(str(os.getpid()))
ckpt = args[args.index("--checkpoint") + 1]
if "--resume" in args:
    done = sorted(d for d in os.listdir(ckpt) if os.path.exists(os.path.join(ckpt, d, "manifest.json")))
    print("resuming from", done[-1])
    sys.exit(0)
for seq in range(1, 61):
    time.sleep(1)
    snap = os.path.join(ckpt, "snap-%06d" % seq)
    os.makedirs(os.path.join(snap, "data"))
    with open(os.path.join(snap, "manifest.json.tmp"), "w") as fh:
        fh.write("{{}}")
    os.replace(os.path.join(snap, "manifest.json.tmp"), os.path.join(snap, "manifest.json"))
"""


def test_tutorial_kills_the_run_as_soon_as_a_snapshot_inside_the_inner_loop_is_committed(tmp_path):
    """The tutorial's commands, with a stand-in for scopeflow: the kill must wait for the second
    snapshot (the first inside the inner loop of kcore.flow) and land right after it, however slow the
    machine is (a fixed `sleep` landed before the first snapshot on a loaded machine)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scopeflow"
    fake.write_text(FAKE_SCOPEFLOW.format(python=sys.executable))
    fake.chmod(0o755)
    (tmp_path / "examples" / "ckpt" / "snap-000007").mkdir(parents=True)  # an earlier try's snapshot
    (tmp_path / "examples" / "ckpt" / "snap-000007" / "manifest.json").write_text("{}")
    pid_file = tmp_path / "fake.pid"
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_PID_FILE=str(pid_file))
    proc = subprocess.run(["bash", "-c", tutorial_kill_block()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    # one second between snapshots: the poll (every 0.2 s) sees the second one, or on a loaded machine the
    # third; a fixed sleep would land anywhere from before the first to the tenth
    assert proc.stdout.strip() in ("resuming from snap-000002", "resuming from snap-000003"), proc.stdout + proc.stderr
    stat = f"/proc/{int(pid_file.read_text())}/stat"
    assert not os.path.exists(stat) or open(stat).read().split(")")[-1].split()[0] == "Z", "the run was not killed"


def test_tutorial_checkpoint_directory_is_ignored_and_removed_by_make_clean():
    block = tutorial_kill_block()
    cd = re.search(r"^cd (\S+)", block, flags=re.M).group(1)
    checkpoint = os.path.normpath(os.path.join(cd, re.search(r"--checkpoint (\S+)", block).group(1)))
    with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as fh:
        assert f"{checkpoint}/" in fh.read().split()
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        clean = re.search(r"^clean:\n((?:\t.*\n)+)", fh.read(), flags=re.M).group(1)
    assert checkpoint in clean.split()
