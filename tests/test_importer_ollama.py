"""Ollama's /api/generate and /api/chat responses: a format added as one spec
(toolkit/importers/specs/ollama.toml), one sniff, one sample and one docs page
(docs/formats/ollama.md), its boundaries placed back from the final response exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit import queries
from toolkit.importers import detect, ollama
from toolkit.importers.mapping import MappingError, load

SAMPLE = Path(__file__).resolve().parent / "cases/ollama/responses.jsonl"
END0 = 1_772_446_504_512_345  # 2026-03-02T10:15:04.512345Z: the first final response (ns cut to µs)


def _rows(kit, tmp_path: Path) -> tuple[dict, list[dict]]:
    s = kit.run([SAMPLE], tmp_path / "ds")  # format auto: the sniff finds it
    return s, kit.rows(tmp_path / "ds", "requests")


def test_boundaries_placed_back_from_the_final_response(kit, tmp_path: Path) -> None:
    s, rows = _rows(kit, tmp_path)
    # 4 records: 3 final responses and the error object; 3 chunks and the model load skipped
    assert (s["read"], s["imported"], s["quarantined"], s["skipped"]) == (4, 3, 1, 4)
    assert list(s["by_format"]) == ["ollama"]
    got = [(r["source_line"], r["ts_end"] - END0,
            *(None if r[b] is None else r["ts_end"] - r[b]
              for b in ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token")),
            r["model"], r["input_tokens"], r["output_tokens"], r["status"], r["finish_reason"], r["derived"],
            r["vantage"], r["clock"])
           for r in rows]
    derived = ["ts_arrival", "ts_scheduled", "ts_first_token"]
    assert got == [
        # arrival = end - total_duration; first token = end - eval_duration; scheduled = that - prompt_eval_duration
        (1, 0, 2_512_000, None, 1_230_079, 1_100_000, None, "llama3.2", 26, 59, "ok", "stop", derived, "server", "wall"),
        # the streamed chat: its final response (line 5), after three chunks
        (5, 4_187_905, 1_905_500, None, 1_879_250, 1_599_250, None, "qwen2.5:0.5b", 31, 64, "ok", "length", derived,
         "server", "wall"),
        # a prompt mostly in the runner's cache: prompt_eval_count counts it, the prefill is short
        (7, 7_737_655, 980_000, None, 947_000, 905_000, None, "llama3.2", 1030, 21, "ok", "stop", derived,
         "server", "wall"),
    ]
    assert [r["request_id"].rsplit("-", 1)[1] for r in rows] == ["1", "5", "7"]  # <file hash>-<line>


def test_error_object_is_quarantined_where_it_is(kit, tmp_path: Path) -> None:
    _rows(kit, tmp_path)
    (q,) = kit.rows(tmp_path / "ds", "quarantine")
    assert (q["source_line"], q["reason_code"], q["reason_detail"]) == (
        8, "missing-field", "created_at or total_duration is missing (not a final response)")


def test_stages_of_a_row(kit, tmp_path: Path) -> None:
    """The stages the views give an Ollama row: preprocess+queue holds the load wait (arrival to
    the runner's prompt start), prefill the runner's prompt processing, decode to the end."""
    _rows(kit, tmp_path)
    got = queries.run_sql(tmp_path / "ds", "SELECT stage_names, stage_values_ms, ttft_ms, e2e_ms FROM stages "
                          "WHERE request_id LIKE '%-1'").to_pylist()
    assert got == [{"stage_names": ["preprocess+queue", "prefill", "decode+postprocess"],
                    "stage_values_ms": [1281.921, 130.079, 1100.0], "ttft_ms": 1412.0, "e2e_ms": 2512.0}]


def test_a_request_without_eval_has_no_first_token(kit, tmp_path: Path) -> None:
    """A final response without eval_duration (no token generated) keeps only what it says."""
    rec = json.loads(SAMPLE.read_text().splitlines()[0])
    del rec["eval_duration"], rec["eval_count"]
    f = kit.write(tmp_path / "r.jsonl", [rec])
    s = kit.run([f], tmp_path / "ds", fmt="ollama")
    assert s["imported"] == 1
    (r,) = kit.rows(tmp_path / "ds", "requests")
    assert (r["ts_end"] - r["ts_arrival"], r["ts_first_token"], r["ts_scheduled"], r["derived"]) == (
        2_512_000, None, None, ["ts_arrival"])


@pytest.mark.parametrize(("field", "value", "code"), [
    ("total_duration", "soon", "bad-type"), ("eval_duration", -5_000_000, "negative-duration"),
    ("created_at", "yesterday", "bad-type"),
])
def test_bad_fields_are_quarantined_with_a_reason(kit, tmp_path: Path, field: str, value: object, code: str) -> None:
    rec = json.loads(SAMPLE.read_text().splitlines()[0])
    rec[field] = value
    f = kit.write(tmp_path / "r.jsonl", [rec])
    s = kit.run([f], tmp_path / "ds", fmt="ollama")
    assert (s["imported"], s["quarantined"]) == (0, 1)
    (q,) = kit.rows(tmp_path / "ds", "quarantine")
    assert q["reason_code"] == code and field in q["reason_detail"]


def test_sniff_finds_generate_and_chat_responses_only() -> None:
    lines = SAMPLE.read_bytes().splitlines()
    assert detect(SAMPLE.read_bytes()) is ollama.IMPORTER
    assert ollama.sniff(lines[0]) and ollama.sniff(lines[1])  # /api/generate, an /api/chat chunk
    assert not ollama.sniff(b'{"error": "model not found"}\n')
    # an OpenAI-style response has "created" (epoch seconds), not Ollama's created_at and done
    assert not ollama.sniff(b'{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "choices": []}\n')


def test_the_spec_is_the_mapping_language_and_names_its_format() -> None:
    m = load(ollama.SPEC, builtin=True)
    assert m.name == "ollama" and set(m.boundaries) == {"ts_arrival", "ts_scheduled", "ts_first_token", "ts_end"}
    with pytest.raises(MappingError, match="built-in importer"):  # a user's mapping may not pass for it
        load(ollama.SPEC)


def test_sniff_reads_the_object_not_its_words() -> None:
    """The keys must be the object's own: a gateway's log line that nests such a response in its
    own record, or an object whose ``done`` is no flag, is not an Ollama response."""
    nested = json.dumps({"event": "proxied", "upstream": {"model": "x", "created_at": "t", "done": True, "response": ""}})
    assert not ollama.sniff(nested.encode() + b"\n")
    assert not ollama.sniff(b'{"model": "x", "created_at": "t", "done": "yes", "response": ""}\n')
    assert ollama.sniff(b'{"model": "x", "created_at": "t", "done": true, "message": {}}\n')
