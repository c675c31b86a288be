"""Python functions for the bad-program catalogue (some deliberately unusable)."""


def double_it(x: int) -> int:
    return 2 * x


def no_annotation(x):
    return x


def rows_passthrough(rows):
    yield from rows
