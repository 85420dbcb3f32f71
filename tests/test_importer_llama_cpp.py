"""llama.cpp server responses (docs/formats/llama-cpp.md): two specs, picked per file by whether
the responses say when they were built. The samples carry the fields of llama-server's own
response builders (tools/server/server-task.cpp), so the boundaries are exact: placed back from
``created`` by ``predicted_ms`` and ``prompt_ms`` where the wall clock exists, one composite stage
laid end to end where it does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run
from toolkit import queries
from toolkit.importers import llama_cpp

CASES = Path(__file__).resolve().parent / "cases/llama-cpp"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, object]]:
    out = {}
    for name in ("oai_responses", "completion_native"):
        ds = tmp_path_factory.mktemp(name) / "ds"
        out[name] = (run([CASES / f"{name}.jsonl"], ds), queries.connect(ds))
    return out


def test_openai_compatible_responses_placed_back_from_created(imported: dict) -> None:
    s, con = imported["oai_responses"]
    # 5 records: 3 final responses, the error response, the bad one; 2 text chunks skipped
    assert (s["read"], s["imported"], s["quarantined"], s["skipped"]) == (5, 3, 2, 2)
    got = con.sql(
        "SELECT request_id, epoch_us(ts_end), epoch_us(ts_end) - epoch_us(ts_first_token), "
        "epoch_us(ts_first_token) - epoch_us(ts_scheduled), epoch_us(ts_scheduled) - epoch_us(ts_arrival), "
        "input_tokens, cached_input_tokens, output_tokens, finish_reason, clock, derived FROM requests "
        "ORDER BY source_line"
    ).fetchall()
    derived = ["ts_arrival", "ts_scheduled", "ts_first_token"]
    assert got == [
        # created 1772446504 s; predicted_ms 1204.5, prompt_ms 45.25; no arrival: prefill starts it
        ("chatcmpl-8f2a", 1_772_446_504_000_000, 1_204_500, 45_250, 0, 31, 0, 64, "stop", "wall", derived),
        # the stream's finish chunk: no usage, so the output is timings.predicted_n and the input unknown
        (
            "chatcmpl-9b31",
            1_772_446_512_000_000,
            2_150_750,
            12_500,
            0,
            None,
            512,
            128,
            "length",
            "wall",
            derived,
        ),
        ("cmpl-77c0", 1_772_446_520_000_000, 240_000, 8_000, 0, 12, 3, 16, "length", "wall", derived),
    ]
    ((stages,),) = con.sql("SELECT stage_ms FROM stages WHERE request_id = 'chatcmpl-8f2a'").fetchall()
    assert stages == {"preprocess+queue": 0.0, "prefill": 45.25, "decode+postprocess": 1204.5}
    assert con.sql(
        "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1"
    ).fetchall() == [
        (6, "missing-field", "an error response (error.code): no timings"),
        (7, "bad-type", "timings.prompt_ms is not a number"),
    ]


def test_native_responses_have_no_wall_clock_one_composite_end_to_end(imported: dict) -> None:
    s, con = imported["completion_native"]
    assert (s["read"], s["imported"], s["quarantined"], s["skipped"]) == (2, 2, 0, 1)  # the partial chunk
    got = con.sql(
        "SELECT epoch_us(s.ts_arrival), epoch_us(s.ts_end), s.stage_names, s.input_tokens, r.cached_input_tokens, "
        "s.output_tokens, r.finish_reason, s.clock FROM stages AS s JOIN requests AS r USING (request_id) ORDER BY 1"
    ).fetchall()
    whole = ["preprocess+queue+prefill+decode+postprocess"]
    assert got == [
        (0, 110_000, whole, 9, 0, 6, "stop", "relative"),  # prompt 20 ms + generation 90 ms
        (110_000, 1_920_750, whole, 40, 32, 128, "length", "relative"),  # laid after it: 10.5 + 1800.25 ms
    ]


def test_sniff_needs_the_timings_object() -> None:
    line = {"object": "chat.completion", "created": 1, "timings": {"prompt_ms": 1.0, "predicted_ms": 2.0}}
    assert llama_cpp.sniff(json.dumps(line).encode())
    assert not llama_cpp.sniff(json.dumps({**line, "timings": {"predicted_ms": 2.0}}).encode())
    assert not llama_cpp.sniff(b'{"note": "\\"timings\\": {\\"predicted_ms\\": 1}"}')
