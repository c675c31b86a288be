"""docs/errors.md documents every diagnostic code the checker can emit and every run-time failure the
runtime tells (its section is the runtime's mapping table, row for row), and nothing else."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnostic_codes import ROOT, emitted_codes  # noqa: E402

DOC = ROOT / "docs" / "errors.md"
TABLE_ROW = re.compile(r"^\| ([EW]0\d{3}) \| (.+?) \| (.+?) \|$", re.M)
RUNTIME_SECTION = "## Run-time failures (E05xx)"


def documented(text: str = None) -> dict[str, tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8") if text is None else text
    return {code: (meaning, example) for code, meaning, example in TABLE_ROW.findall(text)}


def runtime_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert RUNTIME_SECTION in text
    return text.split(RUNTIME_SECTION, 1)[1].split("\n## ", 1)[0]


def check_time_documented() -> dict[str, tuple[str, str]]:
    return {code: row for code, row in documented().items() if code not in documented(runtime_section())}


def test_every_emitted_code_is_documented():
    emitted = emitted_codes("dsl", "compiler")
    assert len(emitted) > 60  # the grep found the codes at all
    missing = {code: sorted(files) for code, files in emitted.items() if code not in documented()}
    assert not missing, f"add these codes to docs/errors.md: {missing}"


def test_every_documented_code_is_emitted():
    stale = sorted(set(check_time_documented()) - set(emitted_codes("dsl", "compiler", "runtime")))
    assert not stale, f"docs/errors.md documents codes nothing emits: {stale}"


def test_every_sink_code_of_the_runtime_is_documented():
    """The runtime's refusals of sink targets (E04xx) are in the table, marked as run-time ones."""
    doc = documented()
    runtime = {code for code in emitted_codes("runtime") if code.startswith("E04")}
    assert runtime, "the grep found the runtime's sink codes"
    assert not sorted(runtime - set(doc))
    for code in runtime - set(emitted_codes("dsl", "compiler")):
        assert doc[code][0].startswith("*(at run time, before Spark starts)*"), code


def test_the_runtime_section_is_the_failure_table():
    """Row for row: a code, its meaning and its example as `runtime/failures.py` RULES has them."""
    from scopeflow.runtime.failures import RULES

    rows = documented(runtime_section())
    table = {r.code: (r.meaning, r.example) for r in RULES}
    assert sorted(rows) == sorted(table), "docs/errors.md's run-time section and failures.RULES list other codes"
    for code, row in table.items():
        assert rows[code] == row, f"{code}: docs/errors.md says {rows[code]}, failures.RULES says {row}"
    order = runtime_section().split("Order of the rules:", 1)[1].split("anything else", 1)[0]
    assert re.findall(r"E0\d{3}", order) == [r.code for r in RULES], "the order of the rules, as docs/errors.md says"


def test_every_runtime_code_is_a_rule():
    """A code the runtime raises itself (a missing input, a header checked before the read) is a row of the
    table too, so the docs list it."""
    from scopeflow.runtime.failures import RULES

    raised = {code for code in emitted_codes("runtime") if code.startswith("E05")}
    assert raised and raised <= {r.code for r in RULES}, sorted(raised - {r.code for r in RULES})


def test_each_code_has_one_row_with_a_meaning_and_an_example():
    rows = TABLE_ROW.findall(DOC.read_text(encoding="utf-8"))
    codes = [code for code, _, _ in rows]
    assert len(codes) == len(set(codes))
    assert codes == sorted(codes)
    for code, meaning, example in rows:
        assert meaning.strip() and example.strip(), code
