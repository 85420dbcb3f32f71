"""``--service`` and ``--model`` name the rows that lack one (the CLI's help): a value the source
recorded wins. Several importers put the option first, so ``--model X`` renamed every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import queries
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
S = ROOT / "sample_traces"


def _names(tmp: Path, path: Path, fmt: str, **opts: str) -> list[tuple]:
    res = import_traces([str(path)], tmp / "ds", fmt=fmt, options=ImportOptions(**opts)).to_json()
    assert res["imported"] > 0 and res["quarantined"] == 0
    return [tuple(r.values()) for r in queries.run_sql(
        tmp / "ds", "SELECT DISTINCT source_format, service, model FROM requests ORDER BY ALL").to_pylist()]


@pytest.mark.parametrize(("path", "fmt", "want"), [
    # LiteLLM records model_group; no service
    (S / "litellm/golden_retail_agent.jsonl", "litellm", [("litellm", "OPT-SVC", "tiny-llama")]),
    # OTLP: the resource's service.name, the span's model (the vLLM spans have none)
    (S / "otlp/golden_gateway_vllm.jsonl", "otlp",
     [("otlp", "litellm-proxy", "tiny-llama"), ("otlp", "vllm-cpu-tiny", "OPT-MODEL")]),
])
def test_recorded_names_win_over_the_options(tmp_path: Path, path: Path, fmt: str, want: list[tuple]) -> None:
    assert _names(tmp_path, path, fmt, service="OPT-SVC", model="OPT-MODEL") == want


def test_options_fill_rows_without_names(tmp_path: Path) -> None:
    """vLLM v1 spans carry no model name and SGLang records neither: the options fill both."""
    got = _names(tmp_path, next((S / "sglang").glob("*.jsonl")), "sglang", service="OPT-SVC", model="OPT-MODEL")
    assert got == [("sglang", "OPT-SVC", "OPT-MODEL")]
