"""Parse .flow text into the AST (`flow_to_ast`), with friendly syntax errors."""
from __future__ import annotations

import difflib
import functools
import math
import re
from importlib import resources
from typing import NamedTuple

import lark
from lark import Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError
from lark.parsers.lalr_interactive_parser import InteractiveParser

from scopeflow.dsl import ast as A
from scopeflow.dsl.diagnostics import Diagnostic, FlowError, register_source
from scopeflow.dsl.syntax_errors import SYNTAX_ERRORS


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    grammar = resources.files("scopeflow.dsl").joinpath("flow.lark").read_text(encoding="utf-8")
    return lark.Lark(grammar, parser="lalr", strict=True, propagate_positions=True, maybe_placeholders=True)


def flow_to_ast(text: str, file: str = "<input>") -> A.Program:
    """Parse `text`; raise FlowError with a positioned diagnostic on a syntax error.

    The same text of the same file is parsed once a process (the AST is immutable): a pipeline that imports
    `stdlib:graph` parsed it again at every check, 21 ms, in a process that runs pipelines one after another
    (a notebook, the tests). Errors are not kept: a text that fails fails again, with the same diagnostic."""
    register_source(file, text)
    return _parsed(text, file)


@functools.lru_cache(maxsize=64)
def _parsed(text: str, file: str) -> A.Program:
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise FlowError([_syntax_diagnostic(err, text, file)]) from None
    try:
        stmts = _Builder(file).transform(tree)
    except VisitError as err:  # errors raised inside the transformer come wrapped
        if isinstance(err.orig_exc, FlowError):
            raise err.orig_exc from None
        raise
    return A.Program(file=file, source=text, stmts=tuple(stmts))


# ---- syntax errors -----------------------------------------------------------------


def _syntax_diagnostic(err: UnexpectedInput, text: str, file: str) -> Diagnostic:
    misspelled = _misspelling(err, text)
    if misspelled is not None:
        word, meant = misspelled
        end_col = word.column + len(word.text)
        span = A.Span(file, word.line, word.column, word.line, end_col, word.start_pos, word.end_pos)
        if meant in _operator_keywords():
            return Diagnostic("E0026", f"unknown operator `{word.text}`", span, label="not an operator",
                              hints=(f"did you mean `{meant}`?",))
        return Diagnostic("E0025", f"unknown keyword `{word.text}`", span, label="not a keyword",
                          hints=(f"did you mean `{meant}`?",))
    line, col = max(err.line, 1), max(err.column, 1)
    width = len(err.token) if isinstance(err, UnexpectedToken) and err.token else 1
    if _at_end(err):
        line, col, width = _end_position(text)
    span = A.Span(file, line, col, line, col + width)
    label = _unclosed_block(err) or _unclosed_paren(err) or _match_example(err)
    if label is not None:
        code, message, hint = label
        return Diagnostic(code, message, span, label="here", hints=(hint,) if hint else ())
    return Diagnostic("E0001", _fallback_message(err), span, label="unexpected here", hints=(_fallback_hint(err),))


@functools.lru_cache(maxsize=1)
def _example_errors() -> list[tuple[tuple, UnexpectedInput]]:
    out = []
    for label, examples in SYNTAX_ERRORS:
        for text in examples:
            try:
                _parser().parse(text)
            except UnexpectedInput as ut:
                out.append((label, ut))
    return out


def _lalr_state(err: UnexpectedInput):
    state = getattr(err, "state", None)
    return getattr(state, "position", state)


def _at_end(err: UnexpectedInput) -> bool:
    return isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END")


def _unclosed_block(err: UnexpectedInput):
    """At end of file, a `}` that would be accepted means a block was left open, whatever came last."""
    if not _at_end(err) or "RBRACE" not in (getattr(err, "accepts", None) or err.expected or ()):
        return None
    return next(label for label, _ in SYNTAX_ERRORS if label[0] == "E0022")


def _after_line_end(err: UnexpectedInput) -> bool:
    """Whether the parser stumbled at the start of a later line (or the end of file) than the last good token."""
    if _at_end(err):
        return True
    if not isinstance(err, UnexpectedToken):
        return False
    last = (getattr(err.state, "value_stack", None) or [None])[-1]
    end_line = getattr(last, "end_line", None) or getattr(getattr(last, "meta", None), "end_line", None)
    return end_line is not None and end_line < err.token.line


def _unclosed_paren(err: UnexpectedInput):
    """A `)` was expected where the next line (or the end of file) begins: a parenthesis was left open."""
    if not isinstance(err, UnexpectedToken) or "RPAR" not in err.accepts or not _after_line_end(err):
        return None
    return next(label for label, _ in SYNTAX_ERRORS if label[0] == "E0013")


def _match_example(err: UnexpectedInput):
    """The label of the catalogue example that fails in the same parser state as `err`, or None.

    Like lark's `match_examples`, but it compares the LALR state only: lark also compares the depth
    of the state stack, so an example written as a file's first statement would never match the
    same mistake after other statements or inside a loop body. An example failing on another kind
    of token counts only when the error is at the start of a line: then the previous line is
    incomplete, whatever follows it; within a line the token itself is the mistake (`where(a = b)`).
    """
    state = _lalr_state(err)
    if state is None:
        return None
    same_type = same_state = None
    for label, ut in _example_errors():
        if _lalr_state(ut) != state or type(ut) is not type(err):
            continue
        if isinstance(err, UnexpectedToken) and ut.accepts != err.accepts:
            continue
        if isinstance(err, UnexpectedToken) and ut.token == err.token:
            return label
        if isinstance(err, UnexpectedToken) and ut.token.type == err.token.type:
            same_type = same_type or label
        same_state = same_state or label
    return same_type or (same_state if _after_line_end(err) else None)


# ---- misspelled keywords ------------------------------------------------------------------------

# How many names before the error may be the misspelled word: a misspelled keyword is read as a
# name, and the parse stumbles at most a few names later (`emit sate best` fails at the next `}`).
_LOOKBACK = 6
# A respelled word that lets the parse go this many tokens past the old error is as good as a full parse.
_HORIZON = 20
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_NEWLINE = re.compile(r"[^\n]")


def _misspelling(err: UnexpectedInput, text: str) -> tuple[_Word, str] | None:
    """(word, keyword) when spelling one of the last words before the error as a keyword lets the
    parse go past the error; the fix that gets furthest wins, then the nearest word, the closest keyword.

    Each try resumes the parser where the word was read: when a word just before the error is close to
    a keyword, the error costs one more parse of the file; otherwise none."""
    failed_at = _error_end(err, text)
    # the common case, decided without parsing again (the last words of the text, keywords and comments included)
    if not any(_close_keywords(w) for w in _WORD.findall(text, 0, failed_at)[-50:]):
        return None
    best, best_key = None, None
    for distance, (word, parser) in enumerate(reversed(_words_before_error(text))):
        for rank, keyword in enumerate(_close_keywords(word.text)):
            reached = _reach_respelled(parser, text, word, keyword, failed_at)
            key = (reached, -distance, -rank)
            if reached > failed_at and (best_key is None or key > best_key):
                best, best_key = (word, keyword), key
    return best


class _Word(NamedTuple):
    text: str
    start_pos: int
    end_pos: int
    line: int
    column: int


@functools.lru_cache(maxsize=4096)
def _close_keywords(word: str) -> tuple[str, ...]:
    return tuple(k for k in difflib.get_close_matches(word, _keywords(), n=3, cutoff=0.6) if k != word)


def _words_before_error(text: str) -> list[tuple[_Word, InteractiveParser]]:
    """Those of the last _LOOKBACK words up to the syntax error (the unexpected one included) that are
    close to a keyword, each with the parser as it was just before reading it. A word is a NAME token,
    or a keyword token glued to what follows (where no name can come, `maxx` is read as `max` `x`)."""
    words: list = []
    count, last = 0, -1

    def read(tok: Token, parser: InteractiveParser) -> None:
        nonlocal count, last
        m = _WORD.match(text, tok.start_pos)
        if m is None or (tok.type != "NAME" and m.end() == tok.end_pos) or m.start() == last:
            return
        count, last = count + 1, m.start()
        if _close_keywords(m.group()):
            word = _Word(m.group(), m.start(), m.end(), tok.line, tok.column)
            words.append((count, word, parser.copy(deepcopy_values=False)))

    parser = _parser().parse_interactive(text)
    try:
        for tok in parser.iter_parse():  # yields each token before feeding it
            read(tok, parser)
    except UnexpectedToken as err:
        read(err.token, parser)  # a token the contextual lexer rejects is raised, never yielded
    except UnexpectedInput:
        pass
    return [(word, state) for n, word, state in words if n > count - _LOOKBACK]


def _reach_respelled(parser: InteractiveParser, text: str, word: _Word, keyword: str, failed_at: int) -> float:
    """How far the text parses (in `text`'s positions) with `word` spelled `keyword`, resuming `parser`
    (the state before `word`); infinity when it parses to the end or _HORIZON tokens past `failed_at`."""
    fixed = text[: word.start_pos] + keyword + text[word.end_pos :]
    shift = len(keyword) - len(word.text)
    parser = parser.copy(deepcopy_values=False)
    # a lexer that starts at the word: what comes before it is blanked (newlines kept for the positions)
    blanked = _NOT_NEWLINE.sub(" ", text[: word.start_pos]) + fixed[word.start_pos :]
    parser.lexer_thread = _parser().parse_interactive(blanked).lexer_thread
    past = 0
    try:
        for tok in parser.iter_parse():
            past += tok.start_pos >= failed_at + shift
            if past > _HORIZON:
                return math.inf
        parser.feed_eof()
    except UnexpectedInput as err:
        return _error_end(err, fixed) - shift
    return math.inf


def _error_end(err: UnexpectedInput, text: str) -> int:
    """Where the text stops being understood: the end of the unexpected token or character."""
    if _at_end(err):
        return len(text)
    if isinstance(err, UnexpectedToken):
        return err.token.end_pos
    return err.pos_in_stream + 1


@functools.lru_cache(maxsize=1)
def _keywords() -> tuple[str, ...]:
    """Every word the grammar uses as a keyword (`source`, `rounds`, `state`, `reduce`, ...)."""
    words = (t.pattern.value for t in _parser().terminals if t.pattern.type == "str")
    return tuple(sorted(w for w in words if re.fullmatch(r"[a-z_]+", w)))


@functools.lru_cache(maxsize=1)
def _operator_keywords() -> frozenset[str]:
    """The built-in operators: the keyword each `*_op` rule of the grammar starts with."""
    grammar = resources.files("scopeflow.dsl").joinpath("flow.lark").read_text(encoding="utf-8")
    return frozenset(re.findall(r'^\w+_op:\s*"(\w+)"', grammar, flags=re.M))


def _fallback_message(err: UnexpectedInput) -> str:
    if isinstance(err, UnexpectedCharacters):
        return f"unexpected character {err.char!r}"
    expected = sorted(_pretty_terminal(t) for t in (getattr(err, "accepts", None) or err.expected or ()))
    found = "end of file" if _at_end(err) else f"`{err.token}`"
    return f"unexpected {found}; expected one of: {', '.join(expected[:12])}"


def _fallback_hint(err: UnexpectedInput) -> str:
    if isinstance(err, UnexpectedCharacters):
        return "names are letters, digits and `_`; strings are in double quotes; comments start with `#`"
    return "the statement is incomplete or has an extra token here; docs/language.md lists the statement forms"


def _pretty_terminal(name: str) -> str:
    if name == "$END":
        return "end of file"
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name
    if pattern.type == "str":
        return f"`{pattern.value}`"
    return name.lower().replace("_", " ")


def _end_position(text: str) -> tuple[int, int, int]:
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    col = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, col, 1


# ---- tree -> AST ------------------------------------------------------------------------


def _unescape(raw: str) -> str:
    body = raw[1:-1]
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(escapes.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class _Builder(Transformer):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _span(self, meta) -> A.Span | None:
        if getattr(meta, "empty", True):
            return None
        return A.Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column, meta.start_pos, meta.end_pos)

    def _tok_span(self, tok: Token) -> A.Span:
        return A.Span(self.file, tok.line, tok.column, tok.end_line, tok.end_column, tok.start_pos, tok.end_pos)

    def __default__(self, data, children, meta):
        raise NotImplementedError(f"no AST builder for grammar rule {data!r}")

    # -- program and statements
    def start(self, children):
        return list(children)

    @v_args(meta=True)
    def pipeline_decl(self, meta, c):
        return A.PipelineDecl(str(c[0]), span=self._span(meta))

    @v_args(meta=True)
    def param_decl(self, meta, c):
        return A.ParamDecl(str(c[0]), c[1], c[2], span=self._span(meta))

    @v_args(meta=True)
    def config_decl(self, meta, c):
        return A.ConfigDecl(_unescape(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def use_decl(self, meta, c):
        return A.UseDecl(_unescape(c[0]), str(c[1]), span=self._span(meta))

    @v_args(meta=True)
    def import_decl(self, meta, c):
        names = c[1:]
        return A.ImportDecl(
            _unescape(c[0]), tuple(str(n) for n in names), name_spans=tuple(self._tok_span(n) for n in names), span=self._span(meta)
        )

    @v_args(meta=True)
    def source_decl(self, meta, c):
        return A.SourceDecl(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def assign(self, meta, c):
        return A.Assign(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def def_decl(self, meta, c):
        name, *rest = c
        params = tuple(p for p in rest if isinstance(p, A.DefParam))
        body = tuple(s for s in rest if isinstance(s, A.Stmt))
        return A.DefDecl(str(name), params, body, span=self._span(meta))

    @v_args(meta=True)
    def stream_param(self, meta, c):
        return A.DefParam(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def scalar_param(self, meta, c):
        return A.DefParam(str(c[0]), None, c[1], c[2], span=self._span(meta))

    @v_args(meta=True)
    def sink_decl(self, meta, c):
        return A.SinkDecl(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def feedback(self, meta, c):
        return A.Feedback(str(c[0]), c[1], var_span=self._tok_span(c[0]), span=self._span(meta))

    @v_args(meta=True)
    def emit(self, meta, c):
        mode, expr, as_name = c
        return A.Emit(mode or "all", expr, str(as_name) if as_name else None, span=self._span(meta))

    def emit_mode(self, c):
        return str(c[0])

    @v_args(meta=True)
    def return_stmt(self, meta, c):
        return A.Return(c[0], span=self._span(meta))

    # -- sources and sinks
    @v_args(meta=True)
    def read_src(self, meta, c):
        fmt, args, schema = c
        return A.ReadSource(str(fmt), tuple(args or ()), schema, format_span=self._tok_span(fmt), span=self._span(meta))

    @v_args(meta=True)
    def stream_src(self, meta, c):
        fmt, args, schema = c
        return A.ReadSource(
            str(fmt), tuple(args or ()), schema, streaming=True, format_span=self._tok_span(fmt), span=self._span(meta)
        )

    @v_args(meta=True)
    def values_src(self, meta, c):
        schema, *rows = c
        return A.ValuesSource(schema, tuple(r for r in rows if r is not None), span=self._span(meta))

    def row(self, c):
        return tuple(x for x in c if x is not None)

    def schema_clause(self, c):
        return c[0]

    @v_args(meta=True)
    def sink_expr(self, meta, c):
        return A.SinkSpec(str(c[0]), tuple(c[1] or ()), span=self._span(meta))

    def call_args(self, c):
        return tuple(c)

    @v_args(meta=True)
    def kwarg(self, meta, c):
        return A.Arg(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def kwarg_name(self, meta, c):
        return A.Arg(str(c[0]), A.Name(str(c[1]), span=self._tok_span(c[1])), span=self._span(meta))

    @v_args(meta=True)
    def kwarg_names(self, meta, c):
        names = tuple(A.Name(str(t), span=self._tok_span(t)) for t in c[1:])
        return A.Arg(str(c[0]), A.Names(names, span=self._span(meta)), span=self._span(meta))

    @v_args(meta=True)
    def value_arg(self, meta, c):
        v = c[0]
        if isinstance(v, Token):
            v = A.Name(str(v), span=self._tok_span(v))
        return A.Arg(None, v, span=self._span(meta))

    # -- streams
    @v_args(meta=True)
    def stream_expr(self, meta, c):
        return A.StreamExpr(c[0], tuple(c[1:]), span=self._span(meta))

    @v_args(meta=True)
    def stream_ref(self, meta, c):
        return A.Ref(str(c[0]), str(c[1]) if c[1] else None, span=self._span(meta))

    @v_args(meta=True)
    def loop_expr(self, meta, c):
        kind, name, *rest = c
        vars_ = tuple(x for x in rest if isinstance(x, A.LoopVar))
        imports = next((x for x in rest if isinstance(x, list)), [])
        options = tuple(x for x in rest if isinstance(x, A.LoopOption))
        body = tuple(x for x in rest if isinstance(x, A.Stmt))
        return A.Loop(kind, str(name), vars_, tuple(imports), options, body, name_span=self._tok_span(name), span=self._span(meta))

    def loop_kind(self, c):
        return str(c[0])

    @v_args(meta=True)
    def var_entry(self, meta, c):
        return A.LoopVar(str(c[0]), c[1], None, span=self._span(meta))

    @v_args(meta=True)
    def var_typed(self, meta, c):
        return A.LoopVar(str(c[0]), c[2], c[1], span=self._span(meta))

    def with_clause(self, c):
        return [x for x in c if x is not None]

    @v_args(meta=True)
    def import_item(self, meta, c):
        return A.LoopImport(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def import_same(self, meta, c):
        span = self._span(meta)
        expr = A.StreamExpr(A.Ref(str(c[0]), span=span), (), span=span)
        return A.LoopImport(str(c[0]), expr, span=span)

    def _opt(name):  # noqa: N805 - small factory for the loop option rules
        @v_args(meta=True)
        def build(self, meta, c):
            return A.LoopOption(name, c[0] if c else None, span=self._span(meta))

        return build

    opt_max = _opt("max")
    opt_on_max = _opt("on_max")
    opt_rounds = _opt("rounds")
    opt_snapshot_every = _opt("snapshot_every")
    opt_snapshot_recompute = _opt("snapshot_recompute")
    del _opt

    @v_args(meta=True)
    def opt_until(self, meta, c):
        return A.LoopOption("until", A.Name(str(c[0]), span=self._tok_span(c[0])), span=self._span(meta))

    def on_max_mode(self, c):
        return str(c[0])

    @v_args(meta=True)
    def name_ref(self, meta, c):
        return A.Name(str(c[0]), span=self._span(meta))

    # -- operators
    @v_args(meta=True)
    def select_op(self, meta, c):
        return A.Select(tuple(x for x in c if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def derive_op(self, meta, c):
        return A.Derive(tuple(x for x in c if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def drop_op(self, meta, c):
        return A.Drop(tuple(str(x) for x in c if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def where_op(self, meta, c):
        return A.Where(c[0], span=self._span(meta))

    @v_args(meta=True)
    def explode_op(self, meta, c):
        return A.Explode(c[0], span=self._span(meta))

    @v_args(meta=True)
    def union_op(self, meta, c):
        return A.Union(tuple(x for x in c if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def join_op(self, meta, c):
        other, on, how = c
        return A.Join(other, on, str(how) if how else "inner", how_span=self._tok_span(how) if how else None, span=self._span(meta))

    @v_args(meta=True)
    def group_op(self, meta, c):
        by, *items = c
        return A.Group(by is not None, tuple(x for x in items if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def reduce_op(self, meta, c):
        by, *items = c
        return A.Reduce(by is not None, tuple(x for x in items if x is not None), span=self._span(meta))

    def by(self, c):
        return True

    @v_args(meta=True)
    def distinct_op(self, meta, c):
        return A.Distinct(span=self._span(meta))

    @v_args(meta=True)
    def apply_op(self, meta, c):
        return A.Apply(str(c[0]), str(c[1]), c[2], span=self._span(meta))

    @v_args(meta=True)
    def sort_op(self, meta, c):
        return A.Sort(tuple(c), span=self._span(meta))

    @v_args(meta=True)
    def sort_key(self, meta, c):
        return A.SortKey(c[0], c[1] == "desc", span=self._span(meta))

    def sort_dir(self, c):
        return str(c[0])

    @v_args(meta=True)
    def limit_op(self, meta, c):
        return A.Limit(int(c[0]), span=self._span(meta))

    @v_args(meta=True)
    def top_op(self, meta, c):
        n, *rest = c
        keys = tuple(x for x in rest if isinstance(x, A.Expr))
        order = tuple(x for x in rest if isinstance(x, A.SortKey))
        return A.Top(n, keys, order, span=self._span(meta))

    @v_args(meta=True)
    def op_call(self, meta, c):
        return A.OpCall(str(c[0]), tuple(x for x in c[1:] if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def named_item(self, meta, c):
        return A.Item(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def bare_item(self, meta, c):
        return A.Item(None, c[0], span=self._span(meta))

    # -- schemas and types
    @v_args(meta=True)
    def schema(self, meta, c):
        return A.SchemaDecl(tuple(x for x in c if x is not None), span=self._span(meta))

    @v_args(meta=True)
    def field_decl(self, meta, c):
        return A.FieldDecl(str(c[0]), c[1], span=self._span(meta))

    def simple_type(self, c):
        return str(c[0])

    def array_type(self, c):
        return f"array<{c[0]}>"

    # -- expressions
    @v_args(meta=True)
    def or_(self, meta, c):
        return A.Binary("or", c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def and_(self, meta, c):
        return A.Binary("and", c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def not_(self, meta, c):
        return A.Unary("not", c[0], span=self._span(meta))

    @v_args(meta=True)
    def compare(self, meta, c):
        return A.Binary(c[1], c[0], c[2], span=self._span(meta))

    @v_args(meta=True)
    def arith(self, meta, c):
        return A.Binary(c[1], c[0], c[2], span=self._span(meta))

    def cmp_op(self, c):
        return str(c[0])

    add_op = mul_op = cmp_op

    @v_args(meta=True)
    def is_null(self, meta, c):
        return A.IsNull(c[0], False, span=self._span(meta))

    @v_args(meta=True)
    def is_not_null(self, meta, c):
        return A.IsNull(c[0], True, span=self._span(meta))

    @v_args(meta=True)
    def in_list(self, meta, c):
        return A.InList(c[0], tuple(c[1:]), False, span=self._span(meta))

    @v_args(meta=True)
    def not_in_list(self, meta, c):
        return A.InList(c[0], tuple(c[1:]), True, span=self._span(meta))

    @v_args(meta=True)
    def neg(self, meta, c):
        inner = c[0]
        if isinstance(inner, A.Lit) and inner.type in ("long", "double"):
            return A.Lit(-inner.value, inner.type, span=self._span(meta))
        return A.Unary("-", inner, span=self._span(meta))

    @v_args(meta=True)
    def field_access(self, meta, c):
        return A.FieldAccess(c[0], str(c[1]), span=self._span(meta))

    @v_args(meta=True)
    def index(self, meta, c):
        return A.Index(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def call(self, meta, c):
        callee, *args = c
        args = tuple(a for a in args if a is not None)
        span = self._span(meta)
        if isinstance(callee, A.Name):
            return A.Call(callee.name, args, span=span)
        if isinstance(callee, A.FieldAccess) and isinstance(callee.base, A.Name):
            return A.Call(callee.name, args, module=callee.base.name, span=span)
        raise FlowError([Diagnostic("E0002", "only a function name can be called", span, label="not a function",
                                    hints=("call a builtin like `abs(x)` or a Python function like `u.score(x)`",))])

    @v_args(meta=True)
    def name(self, meta, c):
        return A.Name(str(c[0]), span=self._span(meta))

    @v_args(meta=True)
    def cast(self, meta, c):
        return A.Cast(c[0], c[1], span=self._span(meta))

    # -- literals
    @v_args(meta=True)
    def int_lit(self, meta, c):
        return A.Lit(int(c[0]), "long", span=self._span(meta))

    @v_args(meta=True)
    def dec_lit(self, meta, c):
        return A.Lit(float(c[0]), "double", span=self._span(meta))

    @v_args(meta=True)
    def neg_int_lit(self, meta, c):
        return A.Lit(-int(c[0]), "long", span=self._span(meta))

    @v_args(meta=True)
    def neg_dec_lit(self, meta, c):
        return A.Lit(-float(c[0]), "double", span=self._span(meta))

    @v_args(meta=True)
    def str_lit(self, meta, c):
        return A.Lit(_unescape(c[0]), "string", span=self._span(meta))

    @v_args(meta=True)
    def true_lit(self, meta, c):
        return A.Lit(True, "boolean", span=self._span(meta))

    @v_args(meta=True)
    def false_lit(self, meta, c):
        return A.Lit(False, "boolean", span=self._span(meta))

    @v_args(meta=True)
    def null_lit(self, meta, c):
        return A.Lit(None, "null", span=self._span(meta))
