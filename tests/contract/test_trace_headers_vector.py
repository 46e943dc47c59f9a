"""The Python side of the shared trace-headers vector (schemas/vectors/trace-headers.json): every header set gives the
remote span context the TypeScript and Go clients extract from it, or none. The worker reads an input record's trace
context and the Python client a context record's with the same function (``trace_headers.extract``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from om_stream.trace_headers import span_context_of

VECTOR = Path(__file__).resolve().parents[2] / "schemas" / "vectors" / "trace-headers.json"
CASES: list[dict[str, Any]] = json.loads(VECTOR.read_text())["cases"]


def test_the_vector_holds_cases_with_and_without_a_trace() -> None:
    expects = [case["expect"] for case in CASES]
    assert any(e is None for e in expects) and any(e is not None and e["tracestate"] for e in expects)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_python_reads_each_header_set_as_the_other_clients_do(case: dict[str, Any]) -> None:
    headers = [(name, value.encode()) for name, value in case["headers"]]
    found = span_context_of(headers)
    expect = case["expect"]
    if expect is None:
        assert found is None
        return
    assert found is not None and found.is_remote
    assert f"{found.trace_id:032x}" == expect["trace_id"]
    assert f"{found.span_id:016x}" == expect["span_id"]
    assert found.trace_flags.sampled == expect["sampled"]
    assert found.trace_state.to_header() == expect["tracestate"]
