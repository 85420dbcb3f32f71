"""``import_traces``: raw log files in, dataset rows out, every record accounted for.

Per input file: detect or look up the importer, stream the file in batches of lines through the
importer's SQL and the shared checks, split the candidates into skipped records (blank lines, other events, start-up spans: no request), quarantine rows,
duplicates and imported rows, and stage the Parquet output. The whole import is committed at
once (``store.Staging``). Counts always reconcile: read = imported + quarantined + duplicates.
"""

from __future__ import annotations

import os
import queue
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import duckdb
import numpy as np
import pyarrow as pa

from toolkit import __version__, schema
from toolkit.importers import REGISTRY, detect, get_importer
from toolkit.importers._common import SPAN_IDENTITY, ImportOptions, checked_sql
from toolkit.seen import SeenSet, first_new
from toolkit.sources import BATCH_BYTES, InputError, Source, expand, head, iter_lines
from toolkit.store import Dataset, Staging

RAW_CAP = 4096
WRITE_ROWS = 200_000  # rows per Arrow slice handed to the Parquet writer
Progress = Callable[[str, int], None]


@dataclass
class FileResult:
    path: str
    format: str
    size: int
    sha256: str
    status: str = "imported"  # or "already-imported"
    read: int = 0
    imported: int = 0
    quarantined: int = 0
    duplicates: int = 0
    skipped: int = 0
    truncated: bool = False
    by_reason: dict[str, int] = field(default_factory=dict)
    note: str | None = None


@dataclass
class ImportResult:
    dataset: str
    import_id: str | None
    files: list[FileResult]

    def total(self, key: str) -> int:
        return sum(getattr(f, key) for f in self.files)

    @property
    def bad_fraction(self) -> float:
        read = self.total("read")
        return self.total("quarantined") / read if read else 0.0

    def to_json(self) -> dict:
        by_format: dict[str, Counter] = {}
        by_reason: Counter = Counter()
        for f in self.files:
            c = by_format.setdefault(f.format, Counter())
            for k in ("read", "imported", "quarantined", "duplicates", "skipped"):
                c[k] += getattr(f, k)
            by_reason.update(f.by_reason)
        return {
            "dataset": self.dataset,
            "import_id": self.import_id,
            "read": self.total("read"),
            "imported": self.total("imported"),
            "quarantined": self.total("quarantined"),
            "duplicates": self.total("duplicates"),
            "skipped": self.total("skipped"),
            "by_format": {k: dict(v) for k, v in by_format.items()},
            "by_reason": dict(by_reason),
            "files": [asdict(f) for f in self.files],
        }


def resolve_format(src: Source, fmt: str) -> ModuleType:
    """The importer for ``src``: named, or sniffed from its first bytes (``auto``)."""
    if fmt != "auto":
        return get_importer(fmt)
    if src.size == 0:
        raise InputError(f"{src.name}: file is empty, cannot detect its format (give --format)")
    imp = detect(head(src))
    if imp is None:
        raise InputError(
            f"{src.name}: format not recognised; known formats: {', '.join(REGISTRY)} (give --format)"
        )
    return imp


def _configure(imp: ModuleType, src: Source, options: ImportOptions) -> ModuleType:
    """An importer whose SQL depends on per-import settings (``mapping``) is bound to each file here."""
    return imp.configure(src, options) if hasattr(imp, "configure") else imp


def connect(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"SET threads = {threads or os.cpu_count() or 2}")
    con.execute("SET memory_limit = '600MB'")
    con.execute("SET preserve_insertion_order = false")
    return con


def import_traces(
    paths: list[str],
    out: str | Path,
    fmt: str = "auto",
    options: ImportOptions | None = None,
    keep_raw: bool = False,
    batch_rows: int = 250_000,
    progress: Progress | None = None,
    lock_timeout_s: float = 600.0,
) -> ImportResult:
    """Import log files into the dataset at ``out`` (created if needed), atomically.

    Raises:
        InputError: a file cannot be read or its format is unknown (nothing is written).
        UnknownFormat: ``fmt`` names no importer.
    """
    options = options or ImportOptions()
    if fmt != "auto":
        get_importer(fmt)  # fail on an unknown name before touching the dataset
    ds = Dataset.open(out, create=True)
    sources: list[Source] = []
    try:
        with ds.locked(lock_timeout_s):
            sources = expand(paths)
            plan = [(src, _configure(resolve_format(src, fmt), src, options)) for src in sources]
            staging = Staging(ds)
            writer = _BackgroundWriter(staging)
            imported_at = datetime.now(UTC).replace(tzinfo=None)
            con = connect()
            seen = SeenSet()
            loaded: set[str] = set()
            results: list[FileResult] = []
            seen_hashes: dict[tuple[str, str], str] = {}
            try:
                sizes = {(f["size"], f["format"]) for i in ds.manifest()["imports"] for f in i["files"]}
                for src, imp in plan:
                    res = FileResult(path=src.name, format=imp.NAME, size=src.size, sha256="")
                    results.append(res)
                    # Hashing costs a full read: do it first only when a same-size file was seen before
                    # (in the dataset or earlier in this run), else on a thread while the import runs.
                    if (src.size, imp.NAME) in sizes:
                        res.sha256 = src.sha256
                        prior = ds.imported_file(res.sha256, imp.NAME) or (
                            {"path": seen_hashes[(res.sha256, imp.NAME)], "import_id": "this import"}
                            if (res.sha256, imp.NAME) in seen_hashes else None)
                        if prior:
                            res.status = "already-imported"
                            res.note = f"same bytes as {prior['path']} (import {prior['import_id']}): nothing added"
                            continue
                        hasher = None
                    else:
                        hasher = threading.Thread(target=lambda s=src: s.sha256, daemon=True)
                        hasher.start()
                    if imp.NAME not in loaded:
                        _load_seen(con, ds, imp, seen)
                        loaded.add(imp.NAME)
                    _import_file(con, writer, seen, src, imp, options, keep_raw, batch_rows, imported_at, res,
                                 progress)
                    if hasher:
                        hasher.join()
                        res.sha256 = src.sha256
                    seen_hashes[(res.sha256, imp.NAME)] = src.name
                    sizes.add((src.size, imp.NAME))  # a same-size file later in this run is hashed first
                writer.close()
                entry = {
                    "time": imported_at.isoformat() + "Z",
                    "stagelens_version": __version__,
                    "schema_version": schema.version(),
                    "options": {"format": fmt, "service": options.service, "model": options.model,
                                "keep_raw": keep_raw},
                    "files": [asdict(r) for r in results if r.status == "imported"],
                }
                if entry["files"]:
                    staging.commit(entry)
                    import_id: str | None = staging.import_id
                else:
                    staging.discard()
                    import_id = None
            except BaseException:
                writer.close(discard=True)
                staging.discard()
                raise
            finally:
                con.close()
            return ImportResult(dataset=str(out), import_id=import_id, files=results)
    finally:
        for src in sources:
            if src.spooled:  # the stdin copy may hold prompts: never leave it behind
                src.path.unlink(missing_ok=True)


def _identity(imp: ModuleType, table: str = "requests") -> str:
    """Hash of a record's identity: format + request id (or trace/span id), per table."""
    if table == "spans":
        return f"hash(getvariable('source_format'), 'span', {getattr(imp, 'SPAN_IDENTITY', SPAN_IDENTITY)})"
    return f"hash(getvariable('source_format'), {imp.IDENTITY})"


def _load_seen(con: duckdb.DuckDBPyConnection, ds: Dataset, imp: ModuleType, seen: SeenSet) -> None:
    """Identities already in the dataset for this format, so re-imported records count as duplicates."""
    glob = ds.table_glob("requests")
    if glob is None:
        return
    con.execute("SET VARIABLE source_format = ?", [imp.NAME])
    keys = con.execute(
        f"SELECT DISTINCT {_identity(imp)} AS k FROM read_parquet(?, hive_partitioning = true) "
        "WHERE source_format = getvariable('source_format')",
        [glob],
    ).fetchnumpy()["k"]
    seen.add(np.asarray(keys, dtype=np.uint64))


class _BackgroundWriter:
    """Writes Parquet on a thread so DuckDB can parse the next batch meanwhile (pyarrow frees the GIL)."""

    def __init__(self, staging: Staging) -> None:
        self._staging = staging
        self._q: queue.Queue = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._q.get()) is not None:
            if self._error is None:
                try:
                    self._staging.write(*item)
                except BaseException as e:  # surfaced on the next put/close
                    self._error = e

    def put(self, table_name: str, tbl: pa.Table) -> None:
        if self._error:
            raise self._error
        self._q.put((table_name, tbl.drop_columns(["_date"]), tbl.column("_date")))

    def close(self, discard: bool = False) -> None:
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()
        if self._error and not discard:
            raise self._error


TABLE_SQL = {"requests": "requests_sql", "spans": "spans_sql"}


def _batches(src: Source, imp: ModuleType, con: duckdb.DuckDBPyConnection, batch_rows: int):  # type: ignore[no-untyped-def]
    """Register each batch of input as the view ``lines``; yields the batch's last line number.

    Document importers (``READS = "document"``, e.g. a Triton trace file, one JSON array) read
    the file themselves through ``getvariable('source_path')`` in a single pass.
    """
    if getattr(imp, "READS", "lines") == "document":
        con.execute("SET VARIABLE source_path = ?", [str(src.path)])
        con.execute("SET VARIABLE source_compression = ?", [src.compression or "none"])
        yield 0
        return
    # nested formats (OTLP) expand several-fold when parsed: they may ask for smaller batches
    for lines in iter_lines(src, batch_rows, getattr(imp, "BATCH_BYTES", BATCH_BYTES)):
        con.register("lines", lines)
        yield int(lines.column("ln")[-1].as_py())
        con.unregister("lines")


def _import_file(
    con: duckdb.DuckDBPyConnection,
    writer: _BackgroundWriter,
    seen: SeenSet,
    src: Source,
    imp: ModuleType,
    options: ImportOptions,
    keep_raw: bool,
    batch_rows: int,
    imported_at: datetime,
    res: FileResult,
    progress: Progress | None,
) -> None:
    for name, value in {
        "source_format": imp.NAME, "source_file": src.name, "file_hash": src.name_hash,
        "service": options.service, "model": options.model, "clock_origin_us": options.clock_origin_us,
        "imported_at": imported_at,
    }.items():
        con.execute(f"SET VARIABLE {name} = ?", [value])
    reasons: Counter = Counter()
    last_ln = 0
    tables = [t for t, fn in TABLE_SQL.items() if hasattr(imp, fn)]
    compiled: dict[str, str] = {}
    document = getattr(imp, "READS", "lines") == "document"
    for last_ln in _batches(src, imp, con, batch_rows):
        for table in tables:
            if table not in compiled:
                cand = getattr(imp, TABLE_SQL[table])()
                present = set(con.sql(f"SELECT * FROM ({cand}) LIMIT 0").columns)
                compiled[table] = (
                    f"SELECT *, CASE WHEN row_kind = 'record' AND _why IS NULL THEN {_identity(imp, table)} END AS _k "
                    f"FROM ({checked_sql(imp, cand, present, table)})")
            try:
                con.execute(f"CREATE OR REPLACE TEMP TABLE _cand AS {compiled[table]}")
            except duckdb.InvalidInputException:
                if not document:
                    raise
                # DuckDB's message may quote the file's text (a prompt): say what, not what it read
                raise InputError(f"{src.name}: not a complete {imp.NAME} document "
                                 "(truncated or malformed JSON); nothing was imported") from None
            bad = 0
            for kind, code, n in con.execute("SELECT row_kind, _why['code'], count(*) FROM _cand GROUP BY ALL").fetchall():
                if kind == "skip":
                    res.skipped += n
                else:
                    res.read += n
                    if code:
                        reasons[code] += n
                        bad += n
            if bad:
                _write_quarantine(con, writer, keep_raw and not document)
            _write_rows(con, writer, seen, res, table)
        if progress:
            progress(src.name, last_ln)
    if src.truncated:
        res.read += 1
        res.truncated = True
        reasons["truncated"] += 1
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _cand AS SELECT ? AS ln, 'record' AS row_kind, "
            "{'code': 'truncated', 'detail': 'compressed stream ends early; nothing after line ' || ? || ' "
            "could be read'} AS _why",
            [last_ln + 1, last_ln],
        )
        _write_quarantine(con, writer, keep_raw=False)
    res.quarantined = sum(reasons.values())
    res.by_reason = dict(reasons)


def _write_quarantine(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, keep_raw: bool) -> None:
    raw = f"left(l.line, {RAW_CAP})" if keep_raw else "CAST(NULL AS VARCHAR)"
    join = "LEFT JOIN lines l USING (ln)" if keep_raw else ""
    tbl = con.sql(
        f"""SELECT getvariable('source_format') AS source_format, getvariable('source_file') AS source_file,
               c.ln AS source_line, c._why['code'] AS reason_code, c._why['detail'] AS reason_detail,
               {raw} AS raw, CAST(getvariable('imported_at') AS TIMESTAMP) AS imported_at,
               strftime(CAST(getvariable('imported_at') AS TIMESTAMP), '%Y-%m-%d') AS _date
            FROM _cand c {join} WHERE c.row_kind = 'record' AND c._why IS NOT NULL ORDER BY c.ln"""
    ).to_arrow_table()
    writer.put("quarantine", tbl)


def _write_rows(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, seen: SeenSet, res: FileResult,
               table: str) -> None:
    """Keep the first record of each identity (in line order) not seen before; count the rest."""
    ids = con.execute("SELECT ln, _k FROM _cand WHERE _k IS NOT NULL").fetchnumpy()
    keys = np.asarray(ids["_k"], dtype=np.uint64)
    keep = first_new(np.asarray(ids["ln"]), keys, seen)
    n_keep = int(keep.sum())
    res.duplicates += len(keys) - n_keep
    res.imported += n_keep
    if n_keep == 0:
        return
    seen.add(keys[keep])
    if n_keep == len(keys):
        # always a table: a view here would clash with the table the duplicate path creates
        con.execute("CREATE OR REPLACE TEMP TABLE _keep AS SELECT * FROM _cand WHERE _k IS NOT NULL")
    else:
        # Rare: duplicates in this batch. Records are told apart by (ln, position among equal keys).
        con.register("_kept_keys", pa.table({"ln": ids["ln"][keep], "k": keys[keep]}))
        con.execute(
            """CREATE OR REPLACE TEMP TABLE _keep AS
               SELECT c.* FROM (SELECT *, row_number() OVER (PARTITION BY ln, _k) AS _n
                                FROM _cand WHERE _k IS NOT NULL) c
               SEMI JOIN _kept_keys k ON c.ln = k.ln AND c._k = k.k
               WHERE c._n = 1"""
        )
        con.unregister("_kept_keys")
    # in slices, so a large batch (a whole JSON document) never becomes one big Arrow table
    reader = con.sql(_OUTPUT_SQL[table]).to_arrow_reader(WRITE_ROWS)
    for batch in reader:
        writer.put(table, pa.Table.from_batches([batch]))


def _output_sql(table: str) -> str:
    t = schema.table(table)
    cols = []
    for c in t.columns:
        if c.type == "timestamp":
            cols.append(f"make_timestamp({c.name}) AS {c.name}")
        elif c.name in ("source_format", "source_file"):
            cols.append(f"getvariable('{c.name}') AS {c.name}")
        elif c.name == "source_line":
            cols.append("ln AS source_line")
        else:
            cols.append(c.name)
    return (f"SELECT {', '.join(cols)}, strftime(make_timestamp({t.partition_by}), '%Y-%m-%d') AS _date "
            "FROM _keep")


_OUTPUT_SQL = {name: _output_sql(name) for name in TABLE_SQL}

