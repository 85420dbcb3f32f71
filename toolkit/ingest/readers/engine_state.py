"""Import one file of engine state: DuckDB reads it whole, its format's SQL gives the candidates,
and they are split into quarantine rows, duplicates and new ``engine_state`` rows for the writer.

The file is read as text lines by ingest's line reader (``register_lines``), numbered in file
order; bytes that are not UTF-8 are replaced (the numbers and labels read are ASCII).
A record's identity is its (format, time, replica, engine, model), compared exactly: the first in
line order is kept, a later one in the file, in an earlier file of the import or in the dataset
is a duplicate (the same scrape exported twice).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import duckdb

from toolkit.enginestate import EngineFormat
from toolkit.importers._common import TS_MAX_US
from toolkit.ingest.job import FileJob
from toolkit.ingest.writer import BackgroundWriter
from toolkit.inputs.sources import Source
from toolkit.inputs.streams import TOO_LARGE, iter_lines
from toolkit.store import Dataset

KEY = "ts_us, replica, engine, model"
_SEEN = "_engine_seen"  # the identities of this import's connection: the dataset's, then each file's


def import_engine_file(job: FileJob[EngineFormat], ds: Dataset) -> None:
    """Read the job's file as its engine format and queue its rows; ``job.res`` gets the counts
    (read = imported + quarantined + duplicates; lines that are no record of the format are
    ``skipped``). ``ds``: the dataset, whose identities of the format count as duplicates."""
    con, src, fmt, res = job.run.con, job.src, job.imp, job.res
    options, imported_at = job.run.settings.options, job.run.settings.imported_at
    year = (
        datetime.fromtimestamp(options.clock_origin_us / 1e6).year
        if options.clock_origin_us
        else imported_at.year
    )
    for name, value in {
        "source_format": fmt.name,
        "source_file": src.name,
        "service": options.service,
        "model": options.model,
        "log_year": year,
        "log_replica": re.sub(
            r"\.(gz|zst)$", "", Path(src.name).name
        ),  # a log compressed later: the same server
        "imported_at": imported_at,
    }.items():
        con.execute(f"SET VARIABLE {name} = ?", [value])
    lines = register_lines(con, src, fmt.keep)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _ec AS SELECT * FROM ({fmt.sql()})")
    if fmt.unreadable is not None:
        con.execute(f"INSERT INTO _ec BY NAME ({fmt.unreadable()})")
    con.execute(
        "INSERT INTO _ec BY NAME SELECT ln, 'too-large' AS reason_code, 'the line is longer than the bound "
        "on a line (--max-line-mb): not read' AS reason_detail FROM lines WHERE line = ?",
        [TOO_LARGE],
    )
    _load_seen(con, ds, fmt.name)
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _ek AS
        SELECT *, CASE WHEN _code IS NULL THEN
                   row_number() OVER (PARTITION BY {KEY}, _code IS NULL ORDER BY ln) > 1
                   OR EXISTS (SELECT 1 FROM {_SEEN} s WHERE s.fmt = getvariable('source_format')
                              AND s.ts_us = c.ts_us AND s.replica IS NOT DISTINCT FROM c.replica
                              AND s.engine IS NOT DISTINCT FROM c.engine AND s.model IS NOT DISTINCT FROM c.model)
               END AS _dup
        FROM (SELECT * REPLACE (coalesce(model, getvariable('model')) AS model),
                     coalesce(reason_code, CASE WHEN ts_us IS NULL THEN 'missing-field'
                                                WHEN ts_us < 0 OR ts_us >= {TS_MAX_US} THEN 'bad-type' END) AS _code,
                     coalesce(reason_detail, CASE WHEN ts_us IS NULL THEN 'the record has no time'
                                                  WHEN ts_us < 0 OR ts_us >= {TS_MAX_US}
                                                  THEN 'the time is outside 1970..2200' END) AS _detail
              FROM _ec) c""")
    counts = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE _code IS NOT NULL), count(*) FILTER (WHERE _dup) FROM _ek"
    ).fetchone()
    assert counts is not None
    res.read, res.quarantined, res.duplicates = counts
    res.imported = res.read - res.quarantined - res.duplicates
    recorded = con.execute("SELECT count(DISTINCT ln) FROM _ek").fetchone()
    res.skipped = 0 if fmt.document else max(0, lines - (recorded[0] if recorded else 0))
    res.by_reason = dict(
        Counter(
            dict(con.execute("SELECT _code, count(*) FROM _ek WHERE _code IS NOT NULL GROUP BY 1").fetchall())
        )
    )
    if fmt.note:
        res.note = fmt.note
    if src.truncated:  # the compressed stream ended early: what followed the last whole line is lost
        res.truncated = True
        res.note = "the compressed stream is truncated: the lines after the last complete one are lost"
    _write(con, job.run.writer)


def register_lines(con: duckdb.DuckDBPyConnection, src: Source, keep: str | None = None) -> int:
    """The table ``lines(ln, line)`` of the whole file (the SQL reads it more than once); returns
    its number of lines. Read by ingest's own line reader (``streams.iter_lines``: Arrow batches,
    gzip/zstd, the bounds on input, invalid UTF-8 replaced; a real vLLM log with a progress bar's
    bare CRs made DuckDB's ``read_csv`` give up), each batch appended by DuckDB. A line over the
    length bound comes as ``TOO_LARGE`` (quarantined by ``import_engine_file``). ``keep``: only the
    lines the format reads are stored (a log's stats lines; the count is of every line)."""
    con.execute("CREATE OR REPLACE TEMP TABLE lines (ln BIGINT, line VARCHAR)")
    where = f"WHERE ({keep}) OR line = getvariable('too_large')" if keep else ""
    con.execute("SET VARIABLE too_large = ?", [TOO_LARGE])
    total = 0
    for batch in iter_lines(src):
        con.register("_batch", batch)
        # CR LF line ends: the CR is no part of a value (rtrim only where there is one: it decodes
        # every character, 1 CPU s a million stats lines)
        con.execute(
            "INSERT INTO lines SELECT ln, CASE WHEN ends_with(line, chr(13)) THEN rtrim(line, chr(13)) ELSE line END "
            f"FROM (SELECT ln, coalesce(line, '') AS line FROM _batch) {where}"
        )
        con.unregister("_batch")
        total += batch.num_rows
    return total


def _load_seen(con: duckdb.DuckDBPyConnection, ds: Dataset, fmt: str) -> None:
    """The dataset's identities of ``fmt``, loaded once per import connection."""
    con.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_SEEN} (fmt VARCHAR, ts_us BIGINT, replica VARCHAR, "
        "engine VARCHAR, model VARCHAR)"
    )
    con.execute("CREATE TEMP TABLE IF NOT EXISTS _engine_seen_formats (fmt VARCHAR)")
    if con.execute("SELECT 1 FROM _engine_seen_formats WHERE fmt = ?", [fmt]).fetchone():
        return
    con.execute("INSERT INTO _engine_seen_formats VALUES (?)", [fmt])
    files = [str(ds.root / f) for f in ds.table_files("engine_state")]
    if files:
        con.execute(
            f"INSERT INTO {_SEEN} SELECT source_format, epoch_us(ts), replica, engine, model "
            "FROM read_parquet(?) WHERE source_format = ?",
            [files, fmt],
        )


def _write(con: duckdb.DuckDBPyConnection, writer: BackgroundWriter) -> None:
    """Queue the new rows and the quarantine rows; remember the new identities."""
    con.execute(
        f"INSERT INTO {_SEEN} SELECT getvariable('source_format'), {KEY} FROM _ek "
        "WHERE _code IS NULL AND NOT _dup"
    )
    rows = con.sql("""
        SELECT make_timestamp(ts_us) AS ts, getvariable('service') AS service, replica, engine, model,
            running, waiting, kv_usage, prefix_hit_rate, preemptions, prompt_tps, generation_tps,
            getvariable('source_format') AS source_format, getvariable('source_file') AS source_file,
            ln AS source_line, strftime(make_timestamp(ts_us), '%Y-%m-%d') AS _date
        FROM _ek WHERE _code IS NULL AND NOT _dup ORDER BY ts_us, ln""").to_arrow_table()
    writer.put("engine_state", rows)
    bad = con.sql("""
        SELECT getvariable('source_format') AS source_format, getvariable('source_file') AS source_file,
            ln AS source_line, _code AS reason_code, _detail AS reason_detail, CAST(NULL AS VARCHAR) AS raw,
            CAST(getvariable('imported_at') AS TIMESTAMP) AS imported_at,
            strftime(CAST(getvariable('imported_at') AS TIMESTAMP), '%Y-%m-%d') AS _date
        FROM _ek WHERE _code IS NOT NULL ORDER BY ln""").to_arrow_table()
    writer.put("quarantine", bad)
