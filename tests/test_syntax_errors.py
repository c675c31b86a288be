"""The syntax-error catalogue (dsl/syntax_errors.py) is its own test: every labelled
example must come out with its label, wherever in a file the mistake is."""
import re

import pytest

from scopeflow.dsl.diagnostics import FlowError
from scopeflow.dsl.parser import flow_to_ast
from scopeflow.dsl.syntax_errors import MISSPELLINGS, SYNTAX_ERRORS

EXAMPLES = [(code, message, hint, text) for (code, message, hint), texts in SYNTAX_ERRORS for text in texts]
SOURCE = 'source e = read csv("data/e.csv", header = true) schema (src: long, dst: long)\n'


def syntax_error(text: str):
    with pytest.raises(FlowError) as info:
        flow_to_ast(text, "bad.flow")
    (diag,) = info.value.diagnostics
    return diag


def _fails_at_end_of_file(text: str) -> bool:
    lines = text.rstrip().splitlines()
    d = syntax_error(text)
    return (d.span.line, d.span.col) == (len(lines), len(lines[-1]) + 1)


@pytest.mark.parametrize("code, message, hint, text", EXAMPLES, ids=[f"{e[0]}-{i}" for i, e in enumerate(EXAMPLES)])
def test_catalogue_example(code, message, hint, text):
    d = syntax_error(text)
    assert (d.code, d.message, d.hints) == (code, message, (hint,))
    assert d.span is not None and d.span.file == "bad.flow"


@pytest.mark.parametrize("code, message, hint, text", EXAMPLES, ids=[f"{e[0]}-{i}" for i, e in enumerate(EXAMPLES)])
def test_catalogue_example_after_other_statements(code, message, hint, text):
    # The state stack is deeper after a statement than at the start of a file; the label must not depend on it.
    assert syntax_error(SOURCE + "x0 = e | distinct\n" + text).code == code


@pytest.mark.parametrize("code, message, hint, text", EXAMPLES, ids=[f"{e[0]}-{i}" for i, e in enumerate(EXAMPLES)])
def test_catalogue_example_inside_a_loop_body(code, message, hint, text):
    if _fails_at_end_of_file(text):
        pytest.skip("this example's mistake is at the end of the file")
    body = "x0 = loop l(v = e) {\n    feedback v <- v\n" + text + "    emit v\n}\n"
    assert syntax_error(SOURCE + body).code == code


def test_codes_are_unique_and_in_the_syntax_range():
    codes = [code for (code, _, _), _ in SYNTAX_ERRORS]
    assert len(codes) == len(set(codes))
    assert all(c.startswith("E00") and c not in ("E0001", "E0002") for c in codes)
    assert not {code for (code, _, _), _ in MISSPELLINGS} & set(codes)


# ---- misspelled keywords and operators (E0025, E0026) -------------------------------------

MISSPELLED = [(code, word, meant, text) for (code, word, meant), texts in MISSPELLINGS for text in texts]
MISSPELLED_IDS = [f"{code}-{word}" for code, word, _, _ in MISSPELLED]
BODY = "x0 = loop l0(v0 = e) {\n    feedback v0 <- v0\n"


def word_span(text: str, word: str) -> tuple[int, int, int, int]:
    """(line, col, end line, end col) of the first occurrence of `word` as a whole word."""
    start = re.search(rf"\b{word}\b", text).start()
    line = text.count("\n", 0, start) + 1
    col = start - (text.rfind("\n", 0, start) + 1) + 1
    return line, col, line, col + len(word)


def assert_suggests(text: str, code: str, word: str, meant: str):
    d = syntax_error(text)
    span = (d.span.line, d.span.col, d.span.end_line, d.span.end_col)
    assert (d.code, span) == (code, word_span(text, word)), d.render(text)
    assert f"`{word}`" in d.message
    assert d.hints == (f"did you mean `{meant}`?",)


@pytest.mark.parametrize("code, word, meant, text", MISSPELLED, ids=MISSPELLED_IDS)
def test_misspelled_word_suggests_the_closest_keyword(code, word, meant, text):
    assert_suggests(text, code, word, meant)


@pytest.mark.parametrize("code, word, meant, text", MISSPELLED, ids=MISSPELLED_IDS)
def test_misspelled_word_after_other_statements(code, word, meant, text):
    assert_suggests(SOURCE + "x0 = e | distinct\n" + text, code, word, meant)


@pytest.mark.parametrize("code, word, meant, text", MISSPELLED, ids=MISSPELLED_IDS)
def test_misspelled_word_inside_a_loop_body(code, word, meant, text):
    assert_suggests(SOURCE + BODY + text + "    emit v0\n}\n", code, word, meant)


def test_the_three_misspellings_of_issue_22():
    # each used to point elsewhere: E0010 "missing `=`", a caret on the next line's `}`, "unexpected `id`"
    assert_suggests("sourse edges = read csv(\"e.csv\") schema (src: long, dst: long)\n", "E0025", "sourse", "source")
    assert_suggests(SOURCE + "x = loop cc(v = e) {\n    best = v | reduce(by src, dst = min(dst))\n"
                    "    feedback v <- v\n    emit sate best\n}\n", "E0025", "sate", "state")
    assert_suggests(SOURCE + "x = e | reduse(by id, n = count())\n", "E0026", "reduse", "reduce")


@pytest.mark.parametrize("text, code", [
    ("sorted = e | where(src = dst)\n", "E0012"),  # a stream named like a keyword is not the mistake
    ("joined = e | distinct\nx = joined | where(src = dst)\n", "E0012"),
    ("x = e | where(state = 1)\n", "E0012"),
    ("x = e | selects(src\nsink x -> console()\n", "E0013"),  # no spelling of `selects` closes the parenthesis
    ("stat = e | distinct\nsink stat ->\n", "E0018"),
    ("x = e | sort(bi src)\n", "E0001"),  # too short to tell
])
def test_names_close_to_keywords_that_are_not_the_mistake(text, code):
    assert syntax_error(SOURCE + text).code == code


def test_a_misspelled_def_or_stdlib_operator_is_a_check_error_not_a_syntax_error():
    # `selct(src)` parses as a call; the checker reports it (E0103) with its own suggestion
    flow_to_ast(SOURCE + "x = e | selct(src) | conected_components()\n", "ok.flow")


@pytest.mark.parametrize("text, found, expected", [
    ("x = e | limit(n)\n", "`n`", "int"),
    ("x = e | sort(src)\n", "`src`", "`by`"),
    ("x = e | join(f, on src == dst, how = left)\n", "`how`", "`kind`"),
    ("x = e | where(src in [1, 2])\n", "`[`", "`(`"),
    ("x = e | explode(n = a) as y\n", "`as`", "`sink`"),
])
def test_fallback_lists_what_was_expected(text, found, expected):
    d = syntax_error(SOURCE + text)
    assert d.code == "E0001"
    assert d.message.startswith(f"unexpected {found}; expected one of: ")
    assert expected in d.message
    assert d.span.line == 2
    assert d.hints


def test_fallback_at_end_of_file_says_so():
    d = syntax_error(SOURCE + "x = e | where(src > 1) | select(a = src) | limit(\n")
    assert d.code == "E0001"
    assert d.message.startswith("unexpected end of file; expected one of: int")


def test_unexpected_character():
    d = syntax_error(SOURCE + "x = e | where(src $ dst)\n")
    assert (d.code, d.message, d.span.line, d.span.col) == ("E0001", "unexpected character '$'", 2, 19)


def test_unclosed_block_is_found_whatever_the_last_statement():
    for last in ("emit v", "sink v -> console()", "y = v | distinct", "feedback v <- v"):
        d = syntax_error(SOURCE + "x = loop l(v = e) rounds 2 {\n    feedback v <- v\n    " + last + "\n")
        assert d.code == "E0022", last


@pytest.mark.parametrize("text", [
    "x = e | where(src == dst\nsink x -> console()\n",
    "x = e | select(src, d = dst\ny = x | distinct\n",
    "x = loop l(v = e) {\n    y = v | where(src > (dst + 1)\n    feedback v <- y\n    emit y\n}\n",
    "x = e | where(src == dst",
])
def test_unclosed_parenthesis_is_found_on_the_next_line(text):
    d = syntax_error(SOURCE + text)
    assert d.code == "E0013"


def test_calling_something_that_is_not_a_name():
    d = syntax_error(SOURCE + "x = e | select(y = e.src.abs(1))\n")
    assert d.code == "E0002"
    assert (d.span.line, d.span.col) == (2, 20)


def test_a_text_is_parsed_once_and_its_errors_every_time():
    # (a pipeline importing `stdlib:graph` parsed it again at every check: 21 ms a run)
    from scopeflow.dsl.diagnostics import _read

    text = SOURCE + "sink e -> csv(\"out/o\")\n"
    first = flow_to_ast(text, "once.flow")
    assert flow_to_ast(text, "once.flow") is first
    assert flow_to_ast(text, "other.flow") is not first and flow_to_ast(text, "other.flow").file == "other.flow"
    assert flow_to_ast(text + "\n", "once.flow") is not first
    bad = SOURCE + "sink e -> \n"
    assert syntax_error(bad) == syntax_error(bad)  # (an error is not kept: raised again, the same)
    # the text of a file is registered again for its diagnostics' excerpts, also when its AST is kept
    flow_to_ast(text.replace("out/o", "out/p"), "once.flow")
    flow_to_ast(text, "once.flow")
    assert _read("once.flow") == text
