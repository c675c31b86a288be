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

# Misspelled keywords (E0025) and built-in operators (E0026). A misspelled keyword is read as a name
# (or, where no name can come, as a keyword and a name: `maxx` is `max` `x`), so the parser stumbles a
# token or two later: `sourse edges = ...` looked like a stream definition missing its `=`.
# dsl/parser.py tries the keywords closest to each word just before the error and names the one that
# lets the parse go on. These examples are its test (tests/test_syntax_errors.py): each entry is
# ((code, misspelled word, suggestion), [bad programs]), and the caret must be exactly on the first
# occurrence of the word, wherever in a file the mistake is.
MISSPELLINGS = [
    (("E0025", "sourse", "source"), ['sourse edges = read csv("e.csv") schema (src: long, dst: long)\n']),
    (("E0025", "snk", "sink"), ["snk e -> console()\n"]),
    (("E0025", "parm", "param"), ["parm n: long = 3\n"]),
    (("E0025", "pipline", "pipeline"), ["pipline demo\n"]),
    (("E0025", "form", "from"), ['form "stdlib:graph" import sssp\n']),
    (("E0025", "improt", "import"), ['from "stdlib:graph" improt sssp\n']),
    (("E0025", "pyton", "python"), ['use pyton "udfs.py" as u\n']),
    (("E0025", "raed", "read"), ['source e = raed csv("e.csv") schema (src: long)\n']),
    (("E0025", "schem", "schema"), ['source e = read csv("e.csv") schem (src: long)\n']),
    (("E0025", "vaules", "values"), ["source e = vaules (a: long) [(1)]\n"]),
    (("E0025", "lop", "loop"), ["x = lop l(v = e) {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "colop", "coloop"), ["x = colop l(a = e, b: (k: long)) {\n    feedback a <- a\n    emit a\n}\n"]),
    (("E0025", "feedbak", "feedback"), ["x = loop l(v = e) {\n    feedbak v <- v\n    emit v\n}\n"]),
    (("E0025", "emti", "emit"), ["x = loop l(v = e) {\n    feedback v <- v\n    emti v\n}\n"]),
    (("E0025", "sate", "state"), ["x = loop l(v = e) {\n    b = v | reduce(by k, n = count())\n"
                                  "    feedback v <- v\n    emit sate b\n}\n"]),
    (("E0025", "lst", "last"), ["x = loop l(v = e) {\n    feedback v <- v\n    emit lst v\n}\n"]),
    (("E0025", "wiht", "with"), ["x = loop l(v = e) wiht (f = e) {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "rouds", "rounds"), ["x = loop l(v = e) rouds 3 {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "evry", "every"), ["x = loop l(v = e) snapshot evry 2 {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "emty", "empty"), ["x = loop l(v = e) until emty(v) {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "maxx", "max"), ["x = loop l(v = e) maxx 3 {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "stp", "stop"), ["x = loop l(v = e) max 3 on max stp {\n    feedback v <- v\n    emit v\n}\n"]),
    (("E0025", "retrun", "return"), ["def f(e: (a: long)) {\n    retrun e\n}\n"]),
    (("E0025", "knd", "kind"), ["x = e | join(f, on e.a == f.b, knd = left)\n"]),
    (("E0025", "ordr", "order"), ["x = e | top(3, by k, ordr n desc)\n"]),
    (("E0025", "dsc", "desc"), ["x = e | sort(by n dsc)\n"]),
    (("E0025", "nul", "null"), ["x = e | where(a is nul)\n"]),
    (("E0025", "iss", "is"), ["x = e | where(a iss null)\n"]),
    (("E0025", "adn", "and"), ["x = e | where(a > 1 adn b)\n"]),
    (("E0025", "cst", "cast"), ["x = e | select(y = cst(a as long))\n"]),
    (("E0026", "reduse", "reduce"), ["x = e | reduse(by id, n = count())\n"]),
    (("E0026", "wher", "where"), ["x = e | wher(src > 1)\n"]),
    (("E0026", "distinc", "distinct"), ["x = e | distinc\n"]),
    (("E0026", "joins", "join"), ["x = e | joins(f, on e.a == f.b)\n"]),
    (("E0026", "grop", "group"), ["x = e | grop(by k, n = count())\n"]),
    (("E0026", "selct", "select"), ["x = e | selct(a, b = a + 1)\n"]),
    (("E0026", "derve", "derive"), ["x = e | derve(n = 1)\n"]),
    (("E0026", "explod", "explode"), ["x = e | explod(n = split(s, \",\"))\n"]),
    (("E0026", "srot", "sort"), ["x = e | srot(by n desc)\n"]),
    (("E0026", "aply", "apply"), ["x = e | aply(u.f) schema (a: long)\n"]),
]
