"""SGLang /generate responses with --enable-metrics timing: the format added as one spec
(toolkit/importers/specs/sglang_timing.toml), read exactly (docs/formats/sglang-timing.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.importers import REGISTRY, SPECS, detect, sglang
from toolkit.importers.mapping import MappingError, load

SAMPLE = Path(__file__).resolve().parent / "cases/sglang-timing/generate_responses.jsonl"
SPEC = SPECS / "sglang_timing.toml"
T0 = 1_796_000_000_000_000


def _rows(kit, tmp_path: Path) -> list[dict]:
    s = kit.run([SAMPLE], tmp_path / "ds")  # format auto: the sniff finds it
    assert (s["read"], s["imported"], s["quarantined"]) == (4, 4, 0)
    assert list(s["by_format"]) == ["sglang-timing"]
    return kit.rows(tmp_path / "ds", "requests")


def test_boundaries_read_and_derived_exactly(kit, tmp_path: Path) -> None:
    got = [(r["request_id"], r["ts_arrival"] - T0, *(None if r[b] is None else r[b] - r["ts_arrival"]
            for b in ("ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end")),
            r["derived"], r["status"], r["finish_reason"], r["num_preemptions"],
            r["input_tokens"], r["cached_input_tokens"], r["output_tokens"])
           for r in _rows(kit, tmp_path)]
    assert got == [
        # scheduled = end - inference_time; queued = scheduled - queue_time (no retraction)
        ("a1f3", 0, 10_300, 14_500, 47_200, None, 412_000, ["ts_queued", "ts_scheduled"], "ok", "stop", 0, 12, 4, 24),
        # retracted once: queue_time is the first wait only, so no queued boundary
        ("b2e4", 1_000_000, None, 80_000, 120_000, None, 1_930_000, ["ts_scheduled"], "ok", "length", 1, 300, 0, 64),
        # aborted in the waiting queue: no scheduler timing at all
        ("c3d5", 2_000_000, None, None, None, None, 250_000, [], "aborted", "abort", 0, 40, 0, 0),
        ("d4c6", 3_000_000, 5_900, 9_000, 30_000, None, 90_000, ["ts_queued", "ts_scheduled"], "ok", "stop", 0, 8, 0, 2),
    ]


def test_end_falls_back_to_arrival_plus_e2e_latency(kit, tmp_path: Path) -> None:
    rec = json.loads(SAMPLE.read_text().splitlines()[3])
    del rec["meta_info"]["decode_finished_ts"], rec["meta_info"]["inference_time"]
    f = kit.write(tmp_path / "r.jsonl", [rec])
    s = kit.run([f], tmp_path / "ds", fmt="sglang-timing")
    assert s["imported"] == 1
    (r,) = kit.rows(tmp_path / "ds", "requests")
    assert (r["ts_end"] - r["ts_arrival"], r["ts_scheduled"], r["derived"]) == (90_000, None, ["ts_end"])


def test_sniff_tells_it_from_sglang_own_logs() -> None:
    head = SAMPLE.read_bytes()
    assert detect(head) is REGISTRY["sglang-timing"]
    assert not sglang.sniff(head)
    # SGLang's JSON request log carries meta_info under "out", with an event: still sglang's
    log = b'{"event": "request.finished", "rid": "x", "out": {"meta_info": {"decode_finished_ts": 1.0, ' \
          b'"request_received_ts": 1.0}}}\n'
    assert sglang.sniff(log) and not REGISTRY["sglang-timing"].sniff(log)


def test_the_spec_is_the_mapping_language_and_names_its_format(tmp_path: Path) -> None:
    m = load(SPEC, builtin=True)
    assert m.name == "sglang-timing" and set(m.boundaries) == {
        "ts_arrival", "ts_scheduled", "ts_queued", "ts_first_token", "ts_end"}
    with pytest.raises(MappingError, match="built-in importer's"):  # a user's mapping may not be it
        load(SPEC)
