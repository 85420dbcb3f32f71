"""azure-lmm, the Azure LMM (multimodal) inference trace 2025: a format declared by its spec alone
(toolkit/importers/specs/azure_lmm.toml, docs/formats/azure-lmm.md). Exact rows of the sample, its
quarantined records' reasons, and the sniff that tells it from azure-llm."""

from __future__ import annotations

from pathlib import Path

from tests.test_importer_clients import counts, imp, quarantine, run_sql
from toolkit.importers import REGISTRY, detect

SAMPLE = Path(__file__).resolve().parent / "cases/azure-lmm/AzureLMMInferenceTrace_multimodal.csv"
T0 = 1_728_993_600_000_000  # 2024-10-15 12:00:00 UTC, µs


def test_sample_rows_and_reasons(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [SAMPLE])
    assert counts(res) == (6, 4, 2, 0, 1)  # the header line is skipped
    rows = run_sql(
        ds,
        """SELECT source_line, epoch_us(ts_arrival) AS a, epoch_us(ts_end) AS e, derived, clock,
                                 vantage, input_tokens, output_tokens FROM requests ORDER BY source_line""",
    )
    assert [
        (r["source_line"], r["a"] - T0, r["e"] - T0, r["input_tokens"], r["output_tokens"]) for r in rows
    ] == [
        (2, 269_000, 269_000, 2873, 112),
        (3, 512_340, 512_340, 1204, 87),
        (4, 1_000_000, 1_000_000, 4410, 251),
        (7, 2_000_001, 2_000_001, 3001, 198),
    ]
    assert all(r["derived"] == ["ts_end"] and (r["clock"], r["vantage"]) == ("wall", "server") for r in rows)
    assert quarantine(ds) == [
        (5, "bad-type", "TIMESTAMP is not a date and time"),
        (6, "bad-type", "ContextTokens is not an integer"),
    ]


def test_declared_by_its_spec_and_told_from_azure_llm() -> None:
    imp_ = REGISTRY["azure-lmm"]
    assert (imp_.name, imp_.vantage) == ("azure-lmm", "server")  # name and vantage from the spec
    assert detect(SAMPLE.read_bytes()) is imp_
    assert detect(b"\xef\xbb\xbftimestamp,numimages,contexttokens,generatedtokens\n") is imp_
    assert detect(b"TIMESTAMP,ContextTokens,GeneratedTokens\n") is REGISTRY["azure-llm"]
    assert not imp_.sniff(b"TIMESTAMP,ContextTokens,GeneratedTokens,NumImages\n")
