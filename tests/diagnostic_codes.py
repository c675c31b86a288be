"""Which diagnostic codes the source can emit (shared by the catalogue and the error-docs tests)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_LITERAL = re.compile(r"""["']([EW]0\d{3})["']""")


def emitted_codes(*folders: str) -> dict[str, set[str]]:
    """Every diagnostic code written as a string literal in the Python files under `folders`: code -> files."""
    out: dict[str, set[str]] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for code in CODE_LITERAL.findall(path.read_text(encoding="utf-8")):
                out.setdefault(code, set()).add(str(path.relative_to(ROOT)))
    return out
