"""docs/errors.md documents every diagnostic code the checker can emit, and nothing else."""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnostic_codes import ROOT, emitted_codes  # noqa: E402

DOC = ROOT / "docs" / "errors.md"
TABLE_ROW = re.compile(r"^\| ([EW]0\d{3}) \| (.+?) \| (.+?) \|$", re.M)


def documented() -> dict[str, tuple[str, str]]:
    return {code: (meaning, example) for code, meaning, example in TABLE_ROW.findall(DOC.read_text(encoding="utf-8"))}


def test_every_emitted_code_is_documented():
    emitted = emitted_codes("dsl", "compiler")
    assert len(emitted) > 60  # the grep found the codes at all
    missing = {code: sorted(files) for code, files in emitted.items() if code not in documented()}
    assert not missing, f"add these codes to docs/errors.md: {missing}"


def test_every_documented_code_is_emitted():
    stale = sorted(set(documented()) - set(emitted_codes("dsl", "compiler", "runtime")))
    assert not stale, f"docs/errors.md documents codes nothing emits: {stale}"


def test_every_sink_code_of_the_runtime_is_documented():
    """The runtime's refusals of sink targets (E04xx) are in the table, marked as run-time ones."""
    doc = documented()
    runtime = {code for code in emitted_codes("runtime") if code.startswith("E04")}
    assert runtime, "the grep found the runtime's sink codes"
    assert not sorted(runtime - set(doc))
    for code in runtime - set(emitted_codes("dsl", "compiler")):
        assert doc[code][0].startswith("*(at run time, before Spark starts)*"), code


def test_each_code_has_one_row_with_a_meaning_and_an_example():
    rows = TABLE_ROW.findall(DOC.read_text(encoding="utf-8"))
    codes = [code for code, _, _ in rows]
    assert len(codes) == len(set(codes))
    assert codes == sorted(codes)
    for code, meaning, example in rows:
        assert meaning.strip() and example.strip(), code
