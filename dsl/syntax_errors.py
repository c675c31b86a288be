"""Labelled bad examples for lark's `match_examples`: friendly syntax errors.

Each entry is ((code, message, hint), [bad programs]). The parser finds the
example whose parser state matches the user's error; the catalogue is also the
test (tests/test_syntax_errors.py parses every example and checks its label).
"""

SYNTAX_ERRORS = [
    (
        ("E0010", "missing `=` in stream definition", "define a stream with `name = source | op | ...`"),
        ["edges | where(src != dst)\n", "x y\n"],
    ),
    (
        ("E0011", "a pipe `|` must be followed by an operator", "e.g. `s | where(x > 0)`; remove the trailing `|`"),
        ["x = edges |\n", "x = edges | | distinct\n", "x = edges |\nsink x -> console()\n"],
    ),
    (
        ("E0012", "`=` is assignment; compare with `==`", "write `where(a == b)`"),
        ["x = e | where(a = b)\n", "x = e | join(f, on a = b)\n"],
    ),
    (
        ("E0013", "unclosed parenthesis in operator arguments", "add the missing `)`"),
        ["x = e | select(a, b\n", "x = e | where(a == (b + 1)\nsink x -> console()\n",
         "x = e | select(a, b = c\nsink x -> console()\n", "x = e | join(f, on a == b\nsink x -> console()\n"],
    ),
    (
        ("E0014", "a join needs `on` before its condition", "write `join(other, on left.k == other.k)`"),
        ["x = e | join(f, e.a == f.b)\n"],
    ),
    (
        ("E0015", "a loop body must be enclosed in `{ ... }`", "write `loop name(v = init) { ... }`"),
        ["x = loop l(v = e) feedback v <- v\n", "x = loop l(v = e) rounds 3 emit v\n"],
    ),
    (
        ("E0016", "a loop needs a name and its variables in parentheses", "write `loop name(v = init) { ... }`"),
        ["x = loop (v = e) { emit v }\n", "x = loop l { emit v }\n", "x = coloop { }\n"],
    ),
    (
        ("E0017", "feedback uses `<-`, not `=`", "write `feedback v <- next`"),
        ["x = loop l(v = e) { feedback v = v\n emit v }\n", "x = loop l(v = e) { feedback v -> v\n emit v }\n"],
    ),
    (
        ("E0018", "a sink needs `->` and a target", "write `sink stream -> csv(\"out/path\", header = true)`"),
        ["sink x csv(\"out\")\n", "sink x = csv(\"out\")\n", "sink x ->\n"],
    ),
    (
        ("E0019", "a schema lists `name: type` pairs", "e.g. `schema (src: long, dst: long)`"),
        ["source e = read csv(\"a.csv\") schema (src, dst)\n", "source e = read csv(\"a.csv\") schema (src long)\n"],
    ),
    (
        ("E0020", "a source is `read FORMAT(path, ...)` or `values (schema) [rows]`", "e.g. `source e = read csv(\"data/e.csv\", header = true) schema (src: long, dst: long)`"),
        ["source e = csv(\"a.csv\")\n", "source e = edges\n"],
    ),
    (
        ("E0021", "unexpected `}`: the block has no matching `{`", "remove the extra `}`"),
        ["x = e\n}\n"],
    ),
    (
        ("E0022", "unclosed `{`: the loop body or def is missing its `}`", "add `}` after the last statement of the body"),
        ["x = loop l(v = e) {\n feedback v <- v\n emit v\n", "def f(e: (a: long)) {\n return e\n"],
    ),
    (
        ("E0023", "a param needs a type and a default value", "e.g. `param path: string = \"data/graph.csv\"`"),
        ["param p = 3\n", "param p: long\nx = e\n"],
    ),
    (
        ("E0024", "an expression is incomplete", "complete the expression after the operator"),
        ["x = e | where(a >)\n", "x = e | select(y = a +)\n", "x = e | where(a and)\n"],
    ),
]
