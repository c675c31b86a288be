"""The catalogue of bad programs (tests/bad/*.flow): each file's `# expect:` lines
are exactly the diagnostics the checker reports for it (see tests/bad/README.md)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scopeflow.compiler import check_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnostic_codes import emitted_codes  # noqa: E402

BAD = Path(__file__).resolve().parent / "bad"
PROGRAMS = sorted(BAD.glob("*.flow"))
EXPECT = re.compile(r"#\s*expect:\s*([EW]\d{4})\s+(?:(\d+):(\d+)|-)\s*$")


def expectations(path: Path) -> list[tuple[str, tuple[int, int] | None]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# expect:"):
            break
        m = EXPECT.match(line)
        assert m, f"{path.name}: malformed expectation {line!r}"
        code, ln, col = m.groups()
        out.append((code, (int(ln), int(col)) if ln else None))
    return out


def reported(diags) -> list[tuple[str, tuple[int, int] | None]]:
    return [(d.code, (d.span.line, d.span.col) if d.span else None) for d in diags]


def check(name: str):
    return check_file(str(BAD / name))


def only(name: str):
    result = check(name)
    assert len(result.errors) == 1, reported(result.errors)
    return result.errors[0]


def test_catalogue_size_and_multi_error_files():
    assert len(PROGRAMS) >= 45
    assert sum(len(expectations(p)) > 1 for p in PROGRAMS) >= 3


def test_every_check_code_has_a_bad_program():
    covered = {code for p in PROGRAMS for code, _ in expectations(p)}
    emitted = emitted_codes("dsl", "compiler")
    assert not sorted(set(emitted) - covered)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_bad_program(path):
    expected = expectations(path)
    assert expected, f"{path.name} has no `# expect:` line"
    result = check_file(str(path))
    if any(code.startswith("E") for code, _ in expected):
        assert reported(result.errors) == expected
    else:  # a warnings-only program: nothing else may be reported
        assert reported(result.diagnostics) == expected


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_rendering(path):
    result = check_file(str(path))
    first = result.diagnostics[0]
    text = first.render()
    assert text.startswith(f"{first.severity}[{first.code}]: ")
    assert "   = help: " in text
    if first.span is None:
        return
    assert f"--> {path}:{first.span.line}:{first.span.col}" in text
    source_line = path.read_text(encoding="utf-8").splitlines()[first.span.line - 1]
    lines = text.splitlines()
    i = lines.index(f" {first.span.line} | {source_line}")
    caret = lines[i + 1]
    gutter = " " * len(str(first.span.line))
    assert caret.startswith(f" {gutter} | {' ' * (first.span.col - 1)}^")


# ---- the words of a few messages and hints ------------------------------------------------


def test_unknown_stream_suggests_close_match():
    d = only("e0101_unknown_stream.flow")
    assert "`edgse`" in d.message
    assert any("did you mean `edges`" in h for h in d.hints)


def test_unknown_operator_function_and_param_suggest_close_matches():
    assert "did you mean `select`" in only("e0103_unknown_operator.flow").hints[0]
    assert "did you mean `edges_path`" in only("e0104_unknown_param.flow").hints[0]
    assert "did you mean `length`" in check("e0304_unknown_function.flow").errors[0].hints[0]
    assert "did you mean `src`" in check("e0301_unknown_field.flow").errors[0].hints[0]


@pytest.mark.parametrize("name, word, meant", [
    ("e0025_misspelled_keyword.flow", "sourse", "source"),
    ("e0025_misspelled_emit_mode.flow", "sate", "state"),
    ("e0025_misspelled_loop_option.flow", "stp", "stop"),
    ("e0025_misspelled_statement_in_body.flow", "feedbak", "feedback"),
    ("e0026_misspelled_operator.flow", "reduse", "reduce"),
    ("e0026_misspelled_operator_without_arguments.flow", "distinc", "distinct"),
])
def test_misspelled_keyword_or_operator_suggests_it_with_the_caret_on_the_word(name, word, meant):
    d = only(name)
    assert f"`{word}`" in d.message
    assert d.hints == (f"did you mean `{meant}`?",)
    assert d.span.end_col - d.span.col == len(word)


@pytest.mark.parametrize("name, scopes", [
    ("e0202_join_across_scopes.flow", ("loop `reach`", "the pipeline")),
    ("e0202_union_across_nested_scopes.flow", ("loop `peel`", "loop `outer`")),
    ("e0202_join_across_nested_scopes.flow", ("loop `peel`", "loop `outer`")),
])
def test_crossing_names_both_scopes_and_suggests_import(name, scopes):
    d = check(name).errors[0]
    assert d.code == "E0202"
    for scope in scopes:
        assert scope in d.message
    assert any("with (" in h for h in d.hints)


def test_outer_stream_in_body_suggests_import():
    d = only("e0201_inner_loop_refers_outer_body.flow")
    assert "loop `peel`" in d.message and "loop `outer`" in d.message
    assert d.hints == ("import it into the loop: with (small = small)",)


def test_loop_local_stream_names_its_loop():
    d = only("e0203_inner_local_used_in_outer_body.flow")
    assert "`h2`" in d.message and "loop `peel`" in d.message
    assert "emit h2" in d.hints[0]


def test_feedback_to_outer_variable_names_both_loops():
    d = only("e0204_feedback_to_outer_variable.flow")
    assert "outer loop `outer`" in d.message and "innermost loop `peel`" in d.message


def test_feedback_schema_mismatch_lists_field_differences():
    d = only("e0205_feedback_schema_mismatch.flow")
    assert "extra field `w: long`" in d.hints
    assert "field `label` is double, expected long" in d.hints


def test_join_field_clash_names_the_field_and_suggests_select():
    d = only("e0308_join_field_clash.flow")
    assert "`src`" in d.message
    assert "select(" in d.hints[0]


def test_non_incremental_aggregate_lists_the_incremental_ones():
    d = check("e0311_non_incremental_reduce.flow").errors[0]
    assert "`avg`" in d.message
    assert "min, max, sum, count, any, all" in d.hints[0]


def test_string_plus_long_suggests_concat():
    d = only("e0303_string_plus_long.flow")
    assert "string + long" in d.message
    assert "concat" in d.hints[0]


def test_python_module_errors_say_why():
    assert "nope.py" in only("e0110_missing_python_file.flow").message
    assert "RuntimeError: this module is broken on purpose" in only("e0110_python_import_raises.flow").message
    assert "has no type annotation" in only("e0112_missing_annotation.flow").message


def test_errors_of_a_def_point_at_the_call_site():
    d = only("e0109_def_input_lacks_field.flow")
    assert "`w: double`" in d.message
    recursive = only("e0107_recursive_def.flow")
    assert [n.span.line for n in recursive.notes] == [6]
    assert "expanded here" in recursive.render()


def test_missing_input_is_only_a_warning():
    result = check("w0001_missing_input.flow")
    assert not result.errors
    assert [d.severity for d in result.diagnostics] == ["warning"]
    assert result.plan is not None


# ---- the command line ---------------------------------------------------------------------


def scopeflow(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "scopeflow.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_cli_check_good_file_exits_0(tmp_path):
    good = tmp_path / "good.flow"
    good.write_text('source v = values (id: long, name: string) [(1, "a"), (2, "b")]\n'
                    "sink v | where(id > 1) -> console()\n")
    proc = scopeflow("check", str(good))
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout
    assert proc.stderr == ""


def test_cli_check_warning_only_exits_0():
    proc = scopeflow("check", str(BAD / "w0001_missing_input.flow"))
    assert proc.returncode == 0, proc.stderr
    assert "warning[W0001]" in proc.stderr


def test_cli_check_bad_file_exits_1_with_diagnostics_on_stderr():
    path = BAD / "e0202_join_across_scopes.flow"
    proc = scopeflow("check", str(path))
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "error[E0202]" in proc.stderr
    assert f"{path}:" in proc.stderr
    assert "= help: import it into the loop" in proc.stderr


def test_cli_check_without_arguments_is_a_usage_error():
    proc = scopeflow("check")
    assert proc.returncode == 2
    assert "usage" in proc.stderr.lower()
