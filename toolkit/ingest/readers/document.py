"""One JSON document the importer reads itself (Triton, vLLM bench...), streamed like the fast
reader; a large array is read in parts (``array_parts``), one per DuckDB thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from toolkit.importers.spec import Importer
from toolkit.ingest import duck
from toolkit.ingest.job import FileJob
from toolkit.ingest.readers import fast
from toolkit.inputs.sources import InputError, Source, log


def import_document(job: FileJob[Importer]) -> bool:
    """One JSON document the importer reads itself (Triton, vLLM bench...): streamed like the fast
    reader, so a large document never sits whole in a DuckDB table. A JSON array whose elements
    the importer can recognise (``ARRAY_ELEMENT``) is read in a part per DuckDB thread (up to
    ``array_parts.MAX_PARTS``): DuckDB parses one array on one thread. A part that does not parse (a
    cut in the wrong place, or a malformed document), or parts that outgrow the buffer pool, mean
    reading the document whole again, which says what is wrong if anything is. It never gives a
    file up (``Reader``): a document no reader can parse is refused (``InputError``)."""
    con, src, imp = job.run.con, job.src, job.imp
    con.execute("SET VARIABLE source_compression = ?", [src.compression or "none"])
    element = imp.layout.array_element
    parts = duck.current_threads(con) if element else 1
    while True:
        point, split = job.checkpoint(), False
        try:
            with document_parts(con, src, parts, element) as paths:
                split = len(paths) > 1
                fast.import_fast(job, document=True, paths=paths if split else None)  # counts into job.res
            return True
        except (*duck.DATA_ERRORS, *duck.OUT_OF_MEMORY) as e:
            job.rollback(point)
            if split:  # each part's reader holds its own buffers: a small pool may not hold them all
                log.info("%s: reading the document in parts failed (%s); reading it whole", src.name,
                         type(e).__name__)
                parts = 1
                continue
            if isinstance(e, duck.OUT_OF_MEMORY):
                if duck.fewer_threads(con, src):
                    continue
                raise
            if "Maximum line size" in str(e):  # a CSV export DuckDB reads whole (LiteLLM's spend logs)
                raise InputError(f"{src.name}: a row longer than {src.limits.max_line_bytes / (1 << 20):g} MiB "
                                 "(--max-line-mb raises it) in a file read whole; nothing was imported") from None
            # DuckDB's message may quote the file's text (a prompt): say what, not what it read
            raise InputError(f"{src.name}: not a complete {imp.name} document "
                             "(truncated or malformed JSON); nothing was imported") from None


@contextmanager
def document_parts(con: duckdb.DuckDBPyConnection, src: Source, n: int, element: bytes | None) -> Iterator[list[str]]:
    """``array_parts.parts`` for an importer that declares ``ARRAY_ELEMENT`` (imported only then:
    fsspec is for this alone), else the file itself."""
    if element is None or n < 2:
        yield [str(src.path)]
        return
    from toolkit.ingest.readers import array_parts
    with array_parts.parts(con, src, n, element) as paths:
        yield paths
