"""Who may import whom (docs/architecture.md), checked from the source: every import statement of every
module, at any depth (imports inside functions count too), against the layer table below."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"scopeflow": "scopeflow", "dsl": "scopeflow.dsl", "compiler": "scopeflow.compiler",
           "runtime": "scopeflow.runtime", "stdlib": "scopeflow.stdlib"}

# layer -> the scopeflow layers it may import (itself included). `version` is a leaf any layer may read.
MAY_IMPORT = {
    "dsl": {"dsl"},
    "stdlib": {"stdlib"},
    "compiler": {"compiler", "dsl", "stdlib", "version"},
    "runtime": {"runtime", "stdlib"},
    "version": set(),
    "package": {"version"},  # scopeflow/__init__.py: the rest of the API is imported by name, on first use
    "face": {"face", "compiler", "dsl", "runtime", "stdlib", "version"},
}
# third-party packages a layer must never import (lark is the compiler's; a generated job runs without it)
NEVER = {
    "dsl": {"pyspark", "py4j"},
    "stdlib": {"lark", "pyspark", "py4j"},
    "compiler": {"pyspark", "py4j"},
    "runtime": {"lark"},
}


def layer_of(module: str) -> str:
    if module == "scopeflow":
        return "package"
    if module == "scopeflow.version":
        return "version"
    part = module.split(".")[1]
    return {"dsl": "dsl", "compiler": "compiler", "runtime": "runtime", "stdlib": "stdlib"}.get(part, "face")


def modules() -> list[tuple[str, Path]]:
    out = []
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out.append((".".join([package, *parts]), path))
    return out


def imports(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported module, line) for every import in the file, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from scopeflow import runtime` imports the module scopeflow.runtime
            out += [(f"{base}.{alias.name}" if base == "scopeflow" else base, node.lineno) for alias in node.names]
    return out


MODULES = modules()


def test_the_table_covers_every_module():
    assert len(MODULES) > 30
    assert {layer_of(m) for m, _ in MODULES} == set(MAY_IMPORT)


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_follow_the_layers(module, path):
    layer = layer_of(module)
    wrong = []
    for name, line in imports(module, path):
        top = name.split(".")[0]
        if top == "scopeflow":
            if layer_of(name) not in MAY_IMPORT[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name} ({layer_of(name)})")
        elif top in NEVER.get(layer, ()):
            wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not wrong, f"the {layer} layer may import only {sorted(MAY_IMPORT[layer])}:\n" + "\n".join(wrong)


def test_the_checker_catches_a_wrong_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from scopeflow.compiler.codegen import plan_to_pyspark\n")
    found = imports("scopeflow.runtime.bad", bad)
    assert found == [("scopeflow.compiler.codegen", 2)]
    assert layer_of(found[0][0]) not in MAY_IMPORT["runtime"]


def test_runtime_import_loads_neither_the_compiler_nor_lark():
    import subprocess
    import sys

    code = ("import sys\nfrom scopeflow import runtime as sf\nsf.LoopSpec, sf.main, sf.scalar_udf\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lark' or m.startswith(('scopeflow.compiler', "
            "'scopeflow.dsl', 'scopeflow.cli', 'scopeflow.api'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_executors_get_only_the_runtime():
    from scopeflow.runtime.shipping import shipped_files

    names = [arc for arc, _ in shipped_files()]
    assert "scopeflow/runtime/udf.py" in names and "scopeflow/stdlib/types.py" in names
    assert "scopeflow/__init__.py" in names and "scopeflow/version.py" in names
    assert not [n for n in names if n.startswith(("scopeflow/compiler", "scopeflow/dsl", "scopeflow/cli",
                                                  "scopeflow/api"))]
