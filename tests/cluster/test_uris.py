"""Sink and checkpoint paths may be file:// (or any Hadoop) URIs, not only plain local paths."""
from __future__ import annotations

import os
import shutil

import pytest

import reference
from cluster.conftest import EXAMPLES
from conftest import read_output
from scopeflow.api import run_file

pytestmark = pytest.mark.spark


def test_file_uri_sink_local(spark, tmp_path):
    shutil.copytree(os.path.join(EXAMPLES, "data"), tmp_path / "data")
    with open(os.path.join(EXAMPLES, "connected_components.flow")) as fh:
        text = fh.read()
    target = tmp_path / "elsewhere" / "components"
    flow = tmp_path / "uri.flow"
    flow.write_text(text.replace('csv("out/components"', f'csv("file://{target}"'))
    run_file(str(flow), spark=spark)
    run_file(str(flow), spark=spark)  # a second run replaces the output atomically
    got = read_output(str(target), (int, int))
    edges = reference.read_csv_rows(os.path.join(EXAMPLES, "data", "graph.csv"), (int, int))
    assert dict(got) == reference.connected_components(edges) and len(got) == len(set(got))
    assert sorted(os.listdir(target.parent)) == ["components"], "no staging or backup folder is left"
