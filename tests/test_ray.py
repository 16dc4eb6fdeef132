"""The Ray executor on a local cluster: the same reports as grading on this machine."""

from __future__ import annotations

import json

import pytest

from grader.engine.batch import grade_batch, report_path
from tests.conftest import ASSIGNMENT_03, TEST_LIMITS

pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def test_ray_executor_writes_the_reports_the_local_executor_writes(class_folder, tmp_path):
    results = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        result = grade_batch(ASSIGNMENT_03, class_folder, out, jobs=2, device="cpu", limits=TEST_LIMITS,
                             executor=executor)
        assert result.graded == 5
        results[executor] = {
            path: {k: v for k, v in json.loads(report_path(out, path).read_text()).items() if k != "duration_s"}
            for path in result.reports
        }
    assert results["ray"] == results["local"]
