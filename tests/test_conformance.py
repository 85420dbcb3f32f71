"""Every importer in the registry meets the same contract, checked on its sample trace.

A format joins stagelens as one ``Importer`` value (toolkit/importers/spec.py) in the registry;
this file is what it must then pass, whatever its layout: its sample is recognised by its sniff
and by no other importer's, its SQL compiles against the shared checks, the fast reader (if it
has one) and the line reader give the same rows, the README's formats table says what the
registry says, and a prompt planted in the sample never reaches a row (the privacy rule,
docs/data-model.md).
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import both_readers
from toolkit import docs
from toolkit.importers import REGISTRY
from toolkit.importers._common import SPANS_ONLY, ImportOptions
from toolkit.importers.spec import Importer
from toolkit.ingest.readers.fast import fast_lines_sql
from toolkit.ingest.split import with_checks
from toolkit.inputs.sources import Limits, expand
from toolkit.inputs.streams import LINE_SCHEMA, head, iter_lines

REPO = Path(__file__).resolve().parent.parent
S, C = REPO / "sample_traces", REPO / "tests" / "cases"
# one sample trace per importer (tests/cases/ where a sample under sample_traces/ would change the
# demo's import of that folder: llmperf is refused without --clock-origin)
SAMPLES: dict[str, Path] = {
    "llm-d-otlp": S / "llm-d-otlp/golden_pd.jsonl",
    "sglang-otlp": S / "sglang-otlp/golden_pd.jsonl",
    "sglang": S / "sglang/golden_request_metrics.jsonl",
    "sglang-timing": C / "sglang-timing/generate_responses.jsonl",
    "ollama": C / "ollama/responses.jsonl",
    "dynamo": C / "dynamo/agent_trace.jsonl",
    "llama-cpp": C / "llama-cpp/oai_responses.jsonl",
    "otlp": S / "otlp/golden_retail_agent_genai.jsonl",
    "vllm-otlp": S / "vllm/golden_spans.jsonl",
    "litellm": S / "litellm/golden_retail_agent.jsonl",
    "litellm-spendlogs": S / "litellm/golden_spend_logs.csv",
    "litellm-spendlogs-parquet": S / "litellm/golden_spend_logs.parquet",
    "langfuse": S / "langfuse/golden_export_observations.jsonl",
    "tgi": S / "tgi/golden_router.log",
    "triton": S / "triton/golden_http_trace.json",
    "trtllm": S / "trtllm/golden_perf_metrics.json",
    "stagelens-replay": C / "replay/replay.jsonl",
    "aiperf": S / "aiperf/golden_profile_export.jsonl",
    "genai-perf": S / "genai-perf/golden_profile_export.json",
    "vllm-bench": S / "vllm-bench/golden_bench_result.json",
    "mooncake": S / "mooncake/golden_trace.jsonl",
    "azure-llm": S / "azure-llm/golden_AzureLLMInferenceTrace_code.csv",
    "azure-lmm": C / "azure-lmm/AzureLMMInferenceTrace_multimodal.csv",
    "burstgpt": S / "burstgpt/golden_BurstGPT_1.csv",
    "guidellm": S / "guidellm/golden_benchmarks.json",
    "llmperf": C / "llmperf/individual_responses.json",
    "mapping": S / "sglang/request_metrics.jsonl",
}
NEVER_SNIFFED = {"mapping"}  # needs --mapping FILE: always asked for by name
ORIGIN = 1_767_268_800_000_000  # --clock-origin for the formats without wall-clock arrivals
NAMES = list(REGISTRY)
SECRET = "PLANTED-PROMPT-7f3a9c"
PROMPT_KEYS = {"prompt", "prompts", "text", "messages", "content", "input", "inputs", "output", "outputs",
               "response", "completion", "generated_text", "text_input", "text_output", "input_text", "output_text"}


def _options(name: str) -> ImportOptions:
    mapping = str(S / "mapping/sglang.toml") if name == "mapping" else None
    return ImportOptions(mapping=mapping, clock_origin_us=ORIGIN if name == "llmperf" else None)


def _bound(name: str, path: Path | None = None) -> Importer:
    src = expand([str(path or SAMPLES[name])])[0]
    return REGISTRY[name].for_file(src, _options(name))


def test_every_importer_has_a_sample_and_every_sample_an_importer() -> None:
    assert set(SAMPLES) == set(REGISTRY)
    assert all(p.is_file() for p in SAMPLES.values()), [n for n, p in SAMPLES.items() if not p.is_file()]


@pytest.mark.parametrize("name", NAMES)
def test_sample_is_sniffed_by_its_importer_and_no_other(name: str) -> None:
    first = head(expand([str(SAMPLES[name])])[0])
    sniffed = [n for n, imp in REGISTRY.items() if imp.sniff(first)]
    if name in NEVER_SNIFFED:
        assert name not in sniffed and not REGISTRY[name].sniff(b"")
    else:
        assert sniffed == [name]


@pytest.mark.parametrize("name", NAMES)
def test_layout_compiles_with_the_shared_checks(name: str) -> None:
    """Each table's SQL binds in DuckDB (on an empty batch of lines, or the document itself) and
    gives the candidate columns the checks need."""
    imp = _bound(name)
    con = duckdb.connect()
    for var, value in {"source_format": imp.name, "source_file": "x", "file_hash": "h-", "service": None,
                       "model": None, "clock_origin_us": ORIGIN, "source_path": str(SAMPLES[name]),
                       "source_compression": "none", "max_line_bytes": Limits().max_line_bytes}.items():
        con.execute(f"SET VARIABLE {var} = ?", [value])
    con.register("lines", LINE_SCHEMA.empty_table())
    for table in imp.layout.tables:
        sql, present = with_checks(con, imp, imp.layout.sql(table), table)
        assert {"ln", "row_kind", "reason_code", "reason_detail"} <= present
        cols = con.sql(f"SELECT * FROM ({sql}) LIMIT 0").columns
        assert "_why" in cols and "_k" in cols
        fast = imp.layout.fast
        if fast and (table == "requests" or not (fast.nested_spans or fast.spans_by_lines)):
            assert imp.layout.fast_sql(table)  # the fast reader's SQL exists for every table it reads


@pytest.mark.parametrize("name", NAMES)
def test_fast_and_line_readers_give_the_same_rows(kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  name: str) -> None:
    (fast_summary, fast_rows), (line_summary, line_rows) = both_readers(kit, [SAMPLES[name]], tmp_path, name, monkeypatch, options=_options(name))
    assert fast_summary["imported"] > 0, fast_summary
    assert fast_summary == line_summary
    assert fast_rows == line_rows


def _formats_table(readme: str) -> list[list[str]]:
    block = re.search(r"<!-- formats:begin -->\n(.*?)<!-- formats:end -->", readme, re.S)
    assert block, "README.md has no formats block"
    rows = [line for line in block.group(1).strip().splitlines()[2:]]
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]


def test_readme_formats_table_round_trips_the_registry() -> None:
    """The README's table is what ``dev.py readme`` renders from the registry, and reading it back
    gives every importer once, in registry order, with its vantage, description and cannot."""
    readme = (REPO / "README.md").read_text()
    assert docs.render(readme) == readme, "README.md is stale: run python3 dev.py readme"
    rows = _formats_table(readme)
    assert [r[0].strip("`") for r in rows] == NAMES
    for (name, vantage, description, _, cannot), imp in zip(rows, REGISTRY.values(), strict=True):
        assert (name.strip("`"), vantage, description, cannot) == (imp.name, imp.vantage, imp.docs.description,
                                                                   imp.docs.cannot)


# -- privacy: a prompt planted in the sample never reaches a row --------------------------------

def _plant_json(value: object) -> object:
    """The same structure with every prompt-like string replaced by SECRET, a ``prompt`` key in each
    object, and a ``gen_ai.prompt`` attribute in each OTLP attribute list."""
    if isinstance(value, list):
        return [_plant_json(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: (SECRET if k in PROMPT_KEYS and isinstance(v, str) else _plant_json(v)) for k, v in value.items()}
    out.setdefault("prompt", SECRET)
    if isinstance(out.get("attributes"), list) and all(isinstance(a, dict) and "key" in a for a in out["attributes"]):
        out["attributes"] = [*out["attributes"], {"key": "gen_ai.prompt", "value": {"stringValue": SECRET}}]
    return out


def _planted(name: str, tmp: Path) -> Path:
    src = SAMPLES[name]
    dst = tmp / src.name
    data = src.read_bytes()
    if src.suffix == ".parquet":
        t = pq.read_table(src)
        t = t.set_column(t.schema.get_field_index("messages"), "messages", pa.array([SECRET] * t.num_rows))
        pq.write_table(t, dst)
    elif src.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(data.decode())))
        header = rows[0]
        at = header.index("messages") if "messages" in header else None
        if at is None:  # no prompt column: one is added, as an export with the text would have
            header.append("prompt")
            rows = [header] + [r + [SECRET] for r in rows[1:]]
        else:
            rows = [header] + [r[:at] + [SECRET] + r[at + 1:] for r in rows[1:]]
        rows.append([SECRET] * len(header))  # and a row of nothing else
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        dst.write_text(buf.getvalue())
    elif src.suffix in (".jsonl", ".log"):
        out = []
        for line in data.decode().splitlines():
            try:
                out.append(json.dumps(_plant_json(json.loads(line))))
            except ValueError:
                out.append(line)  # a text log line: as it is (the secret gets its own line below)
        out.append(f'2025-11-03T14:22:09.004117Z ERROR text_generation_router: prompt="{SECRET}"')
        out.append(json.dumps({"prompt": SECRET, "messages": [{"role": "user", "content": SECRET}]}))
        dst.write_text("\n".join(out) + "\n")
    else:
        dst.write_text(json.dumps(_plant_json(json.loads(data))))
    assert SECRET.encode() in dst.read_bytes()
    return dst


@pytest.mark.parametrize("name", NAMES)
def test_a_planted_prompt_never_reaches_a_row(kit, tmp_path: Path, name: str) -> None:
    planted = _planted(name, tmp_path)
    s = kit.run([planted], tmp_path / "ds", fmt=name, options=_options(name))
    assert s["read"] > 0, s
    assert not [v for v in kit.parquet_strings(tmp_path / "ds") if SECRET in v]
    assert SECRET not in json.dumps(s)


# -- the reader's internals stay the reader's (toolkit/importers/_common.py) --------------------

ROW_KINDS = {"record", "skip", SPANS_ONLY}


def _session(imp: Importer, name: str, path: Path | None = None) -> duckdb.DuckDBPyConnection:
    """A connection set up as ingest's reader sets one up for the file (the sample by default)."""
    con = duckdb.connect()
    for var, value in {"source_format": imp.name, "source_file": "x", "file_hash": "h", "service": None,
                       "model": None, "clock_origin_us": ORIGIN, "source_path": str(path or SAMPLES[name]),
                       "source_compression": "none", "max_line_bytes": Limits().max_line_bytes}.items():
        con.execute(f"SET VARIABLE {var} = ?", [value])
    con.execute("CREATE TEMP MACRO line_id(ln) AS getvariable('file_hash') || '-' || ln")
    return con


def _fast_readable_only(con: duckdb.DuckDBPyConnection, lines: list[str], tmp_path: Path) -> None:
    """A sample whose awkward lines the fast reader gives up on (a malformed line, a value of
    another type: the line reader reads such a file) is read as its lines the fast reader reads."""
    try:
        con.execute("SELECT * FROM lines").fetchall()
        return
    except duckdb.Error:
        pass
    keep = []
    for i, x in enumerate(lines):
        (one := tmp_path / f"line-{i}.jsonl").write_text(x + "\n")
        con.execute("SET VARIABLE source_path = ?", [str(one)])
        try:
            con.execute("SELECT * FROM lines").fetchall()
        except duckdb.Error:
            continue
        keep.append(x)
    con.execute("SET VARIABLE source_path = ?", [str(tmp_path / "readable.jsonl")])
    (tmp_path / "readable.jsonl").write_text("".join(x + "\n" for x in keep if x.strip()))


@pytest.mark.parametrize("name", NAMES)
def test_importer_sql_knows_no_reader_internals(tmp_path: Path, name: str) -> None:
    """An importer reads one view, ``lines``, and passes its ``ln`` through: it neither names
    another view, nor numbers, nor marks rows for a reader's counting. Run on its sample with
    ``ln`` values no reader gives (1000 + 7 per line), on both readers' SQL, in a session where
    ``lines`` is the only relation: every row's ``ln`` is a line's, its ``row_kind`` one of the
    three meanings, and on the fast reader's SQL each line is first on exactly one row.
    Before: OTLP's fast rows wrote ``ln`` 0 or 1, litellm's and OTLP's a ``'mark'`` kind, their
    fast SQL read ``records``, Triton wrote its trace id as ``ln``."""
    imp = _bound(name)
    layout = imp.layout
    assert not any(re.search(r"'mark'|\b(FROM|JOIN)\s+records\b", layout.sql(t)) for t in layout.tables)
    if layout.reads == "document":
        con = _session(imp, name)
        for table in layout.tables:
            got = con.sql(f"SELECT * FROM ({layout.sql(table)})")
            assert set(con.sql(f"SELECT DISTINCT row_kind FROM ({layout.sql(table)})").fetchall()) <= {
                (k,) for k in ROW_KINDS}
            # a document numbers its records as ``ln``, or names the column that does
            assert ("ln" in got.columns) != (layout.numbered_by in got.columns), got.columns
        return
    src = expand([str(SAMPLES[name])])[0]
    text = pa.concat_tables(list(iter_lines(src)))
    n = text.num_rows
    shifted = pa.array([1000 + 7 * i for i in range(n)], pa.int64())
    con = _session(imp, name)
    con.register("lines", text.set_column(0, "ln", shifted))
    for table in layout.tables:
        rows = con.sql(f"SELECT DISTINCT ln, row_kind FROM ({layout.sql(table)})").fetchall()
        assert {ln for ln, _ in rows} <= set(shifted.to_pylist()) and {k for _, k in rows} <= ROW_KINDS, name
    con.unregister("lines")
    if layout.fast is None or (layout.fast.accepts and not layout.fast.accepts(head(src))):
        return
    lines = text.column("line").to_pylist()
    if any(x.startswith("[") for x in lines):  # a line of a JSON array is the line reader's (litellm)
        lines = [x for x in lines if not x.startswith("[")]
        con.execute("SET VARIABLE source_path = ?", [str(tmp_path / "objects.jsonl")])
        (tmp_path / "objects.jsonl").write_text("".join(x + "\n" for x in lines))
    con.execute(f"CREATE TEMP VIEW lines AS {fast_lines_sql(layout.fast.reads)}")
    _fast_readable_only(con, lines, tmp_path)
    for table in ["requests"] if layout.fast.nested_spans or layout.fast.spans_by_lines else layout.tables:
        sql = layout.fast_sql(table)
        got = con.sql(f"SELECT * FROM ({sql}) LIMIT 0").columns
        first = "first_of_line" if "first_of_line" in got else "true"
        kinds, lns, firsts = con.execute(f"SELECT list(DISTINCT row_kind), list(DISTINCT ln), "
                                         f"count(*) FILTER ({first}) FROM ({sql})").fetchone()
        assert set(kinds) <= ROW_KINDS and lns == [1], (name, table)  # the view's ln, 1 on every line
        assert firsts == con.execute("SELECT count(*) FROM lines").fetchone()[0] > 0, (name, table)
