"""`scopeflow explain` output is golden-tested for every example; `check` is clean on every example."""
from __future__ import annotations

import glob
import os

import pytest

from conftest import EXAMPLES, check_golden
from scopeflow.compiler import check_file
from scopeflow.compiler.explain import explain
from scopeflow.compiler.plan import plan_to_text

FLOWS = sorted(glob.glob(os.path.join(EXAMPLES, "*.flow")))


@pytest.mark.parametrize("flow", FLOWS, ids=[os.path.basename(f) for f in FLOWS])
def test_example_checks_clean_and_explain_matches_golden(flow):
    result = check_file(flow)
    assert result.diagnostics == [], [d.render() for d in result.diagnostics]
    text = explain(result.plan)
    check_golden("explain", os.path.basename(flow)[:-5] + ".txt", text)


@pytest.mark.parametrize("flow", FLOWS, ids=[os.path.basename(f) for f in FLOWS])
def test_plan_ir_matches_golden(flow):
    """Every field of the lowered plan, so a change to lowering shows as a diff of tests/golden/plan/."""
    text = plan_to_text(check_file(flow).plan).replace(os.path.abspath(EXAMPLES), "<examples>")
    check_golden("plan", os.path.basename(flow)[:-5] + ".txt", text)


def test_a_missing_golden_file_fails(monkeypatch):
    monkeypatch.delenv("SCOPEFLOW_UPDATE_GOLDEN", raising=False)
    with pytest.raises(pytest.fail.Exception, match="no golden file"):
        check_golden("explain", "no-such-example.txt", "anything")


def test_explain_shows_scopes_chains_feedback_and_schemas():
    text = explain(check_file(os.path.join(EXAMPLES, "kcore.flow")).plan)
    assert "loop kcore.peel [until empty(" in text
    assert "kcore.peel: n013 (kept) -> n008 (h)" in text  # the inner feedback edge
    assert "c03 [kcore.peel] n009 -> n010 -> n011" in text  # a chain inside the inner loop
    assert "(src: long, dst: long, k: long)" in text
