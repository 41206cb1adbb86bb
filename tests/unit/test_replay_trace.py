"""Trace parsing: offsets from timestamps, sorting, and errors that name file and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cascade_bench.replay.trace import TraceError, load_trace, parse_trace

HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def test_offsets_are_seconds_after_the_earliest_timestamp() -> None:
    text = HEAD + (
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:04.0319600,3180,8\n"
        "2023-11-16 18:18:04.0781490,110,27\n"
        "\n"
    )
    trace = parse_trace(text.splitlines(keepends=True), "t.csv")
    assert [r.index for r in trace.rows] == [0, 1, 2]
    assert [round(r.offset_s, 6) for r in trace.rows] == [0.0, 0.052, 60.098189]
    assert (trace.rows[0].context_tokens, trace.rows[0].generated_tokens) == (4808, 10)
    assert trace.span_s == pytest.approx(60.098189)


def test_unsorted_rows_are_sorted_and_keep_their_index() -> None:
    text = HEAD + "2023-01-01 00:00:05,1,1\n2023-01-01 00:00:01,2,2\n"
    rows = parse_trace(text.splitlines(), "t.csv").rows
    assert [(r.index, r.offset_s) for r in rows] == [(1, 0.0), (0, 4.0)]


def test_columns_may_come_in_any_order() -> None:
    text = "GeneratedTokens,TIMESTAMP,ContextTokens\n7,2023-01-01 00:00:00,9\n"
    row = parse_trace(text.splitlines(), "t.csv").rows[0]
    assert (row.context_tokens, row.generated_tokens) == (9, 7)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("2023-01-01 00:00:00,5,1\nnot a date,5,1\n", "t.csv:3: TIMESTAMP is not a date-time"),
        ("2023-01-01 00:00:00,five,1\n", "t.csv:2: ContextTokens is not an integer"),
        ("2023-01-01 00:00:00,5,-1\n", "t.csv:2: GeneratedTokens is negative"),
        ("2023-01-01 00:00:00,5\n", "t.csv:2: expected 3 fields, got 2"),
    ],
)
def test_malformed_rows_name_file_and_line(body: str, message: str) -> None:
    with pytest.raises(TraceError, match=re.escape(message)):
        parse_trace((HEAD + body).splitlines(), "t.csv")


def test_missing_column_and_empty_file() -> None:
    with pytest.raises(TraceError, match=re.escape("t.csv:1: missing column(s) GeneratedTokens")):
        parse_trace(["TIMESTAMP,ContextTokens\n"], "t.csv")
    with pytest.raises(TraceError, match=re.escape("t.csv: empty file")):
        parse_trace([], "t.csv")
    assert parse_trace([HEAD], "t.csv").rows == ()


def test_load_trace_reads_a_file_and_names_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(HEAD + "2023-01-01 00:00:00,5,1\n")
    assert load_trace(path).name == str(path)
    assert len(load_trace(path).rows) == 1
    with pytest.raises(TraceError, match=re.escape("nope.csv: cannot read trace")):
        load_trace(tmp_path / "nope.csv")
    path.write_text(HEAD + "2023-01-01 00:00:00,5,x\n")
    with pytest.raises(TraceError, match=re.escape(f"{path}:2")):
        load_trace(path)
