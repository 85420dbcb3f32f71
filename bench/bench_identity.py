"""What a record identity costs per row, and how many distinct values it gives, for the functions
an identity could be computed with.

    python bench/bench_identity.py [--n 1M] [--repeat 5]

Ids (n of each shape, made in DuckDB): ``uuid`` (random, as vLLM and the OTel SDKs make them) and
``grid`` (``printf('%016x%016x', a, b)`` of two counters, as test harnesses and some tracers make
them). Each function runs over the ids and its result is handed to Python as the import takes it (Arrow); CPU seconds of the process
(``time.process_time``: every thread), the lowest of ``--repeat``, DuckDB on one thread:

* ``hash``: DuckDB's 64-bit ``hash()`` of format, table and id, stagelens's identity before: a
  hash-table hash;
* ``identity``: the identity now (``seen.identity_sql``: DuckDB's MD5 as a 128-bit number, XOR a
  constant for the format and table);
* ``md5 concatenated``: ``md5_number`` of format, NUL, table, NUL, id (the concatenation costs);
* ``md5``, ``sha256``: DuckDB's digests of the id as hex text (32 and 64 characters a row);
* ``polars 2x64``: polars' ``Series.hash`` with two seeds over the Arrow column (128 bits made of two
  64-bit hashes that were not designed as one, and whose values polars does not promise to keep
  from one version to the next);
* ``xxh3_128 per row``: the ``xxhash`` package's ``xxh3_128_intdigest`` called once per id in a
  Python loop (for scale only: a per-row loop is what the import must not have).

Then ``take_first_new`` (toolkit/ingest/seen.py) over the 128-bit keys of the uuid ids, in the
import's batches of 250,000: what the duplicate check costs in NumPy.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import duckdb
import numpy as np

from toolkit.ingest.seen import SeenSet, identity_sql, take_first_new

IDS = {
    "uuid": "SELECT uuid()::VARCHAR AS id FROM range({n})",
    "grid": "SELECT printf('%016x%016x', i // 1000, i % 1000) AS id FROM range({n}) r(i)",
}
SQL = {
    "hash": "hash('otlp', 'span', id)",
    "identity": identity_sql("'otlp'", "spans", "id"),
    "md5 concatenated": "md5_number('otlp' || chr(0) || 'span' || chr(0) || id)",
    "md5": "md5(id)",
    "sha256": "sha256(id)",
}


def _cpu(f: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.process_time()
        out = f()
        best = min(best, time.process_time() - t)
    return best, out


def main(argv: list[str] | None = None) -> int:
    import polars as pl
    import xxhash

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1M", help="ids of each shape: 1M, 200k")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    n = int(float(args.n.lower().replace("m", "e6").replace("k", "e3")))
    con = duckdb.connect()
    con.execute("SET threads = 1")
    print(f"{'ids':<6} {'function':<18} {'CPU s':>7} {'distinct':>10}")
    for shape, sql in IDS.items():
        con.execute(f"CREATE OR REPLACE TABLE ids AS {sql.format(n=n)}")
        for name, expr in SQL.items():
            cpu, table = _cpu(lambda e=expr: con.sql(f"SELECT {e} AS k FROM ids").to_arrow_table(), args.repeat)
            distinct = con.sql(f"SELECT count(DISTINCT {expr}) FROM ids").fetchall()[0][0]
            print(f"{shape:<6} {name:<18} {cpu:7.3f} {distinct:>10,}")
        col = con.sql("SELECT id FROM ids").to_arrow_table().column("id")
        cpu, pair = _cpu(lambda c=col: (lambda s: (s.hash(1), s.hash(2)))(pl.from_arrow(c)), args.repeat)
        distinct = pl.DataFrame({"a": pair[0], "b": pair[1]}).n_unique()  # type: ignore[index]
        print(f"{shape:<6} {'polars 2x64':<18} {cpu:7.3f} {distinct:>10,}")
        texts = col.to_pylist()
        cpu, digests = _cpu(lambda ts=texts: [xxhash.xxh3_128_intdigest(t.encode()) for t in ts], 1)
        print(f"{shape:<6} {'xxh3_128 per row':<18} {cpu:7.3f} {len(set(digests)):>10,}")  # type: ignore[arg-type]
    con.execute(f"CREATE OR REPLACE TABLE ids AS {IDS['uuid'].format(n=n)}")
    keys = con.sql(f"SELECT {SQL['identity']} AS k FROM ids").to_arrow_table().column("k")
    ln = np.arange(n)

    def dedup() -> int:
        seen, kept = SeenSet(), 0
        for lo in range(0, n, 250_000):
            kept += int(take_first_new(seen, ln[lo:lo + 250_000], keys.slice(lo, 250_000)).sum())
        return kept

    cpu, kept = _cpu(dedup, args.repeat)
    print(f"take_first_new over {n:,} keys in batches of 250,000: {cpu:.3f} CPU s, {kept:,} kept")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
