"""`scopeflow explain` output is golden-tested for every example; `check` is clean on every example."""
from __future__ import annotations

import glob
import os

import pytest

from conftest import EXAMPLES
from scopeflow.compiler import check_file
from scopeflow.compiler.explain import explain

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "explain")
FLOWS = sorted(glob.glob(os.path.join(EXAMPLES, "*.flow")))


@pytest.mark.parametrize("flow", FLOWS, ids=[os.path.basename(f) for f in FLOWS])
def test_example_checks_clean_and_explain_matches_golden(flow):
    result = check_file(flow)
    assert result.diagnostics == [], [d.render() for d in result.diagnostics]
    text = explain(result.plan)
    golden = os.path.join(GOLDEN, os.path.basename(flow)[:-5] + ".txt")
    if os.environ.get("SCOPEFLOW_UPDATE_GOLDEN") or not os.path.exists(golden):
        os.makedirs(GOLDEN, exist_ok=True)
        with open(golden, "w") as fh:
            fh.write(text)
    with open(golden) as fh:
        assert text == fh.read(), "explain output changed; review and rerun with SCOPEFLOW_UPDATE_GOLDEN=1"


def test_explain_shows_scopes_chains_feedback_and_schemas():
    text = explain(check_file(os.path.join(EXAMPLES, "kcore.flow")).plan)
    assert "loop kcore.peel [until empty(" in text
    assert "kcore.peel: n013 (kept) -> n008 (h)" in text  # the inner feedback edge
    assert "c03 [kcore.peel] n009 -> n010 -> n011" in text  # a chain inside the inner loop
    assert "(src: long, dst: long, k: long)" in text
