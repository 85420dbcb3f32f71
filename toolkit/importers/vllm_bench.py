"""vLLM ``vllm bench serve --save-result --save-detailed`` result JSON, client vantage.

Facts from docs/formats/vllm-bench.md, checked against a real run of vLLM
0.32's bench client (docs/real-captures.md): one JSON object of parallel lists, index ``i`` =
request ``i`` (``source_line`` = i + 1): ``start_times`` (``time.perf_counter()``, seconds on
the client's monotonic clock), ``ttfts`` and ``latencies`` (s from the start to the first chunk
with ``choices``, role-only chunk included, and to the last token chunk; the usage chunk
excluded), ``itls`` (lists of gaps, s), ``input_lens`` (the server's ``usage.prompt_tokens``
when it reports usage), ``output_lens``, ``errors`` ("" when it succeeded; only tested for
emptiness, never read), plus ``date``, ``model_id`` and the summary scalars. ``generated_texts``
is never read.

Clock: ``start_times`` has no wall-clock anchor. With ``--clock-origin`` (the wall-clock time of
the monotonic clock's zero: on Linux the boot time of the machine that ran the benchmark,
``uptime -s``) the rows are placed on the wall clock. Otherwise the file's ``date`` (written when
the result is saved, just after the last request; local time of that machine, read as UTC, 1 s
resolution) anchors the run so that the last request ends at ``date``. Without either the times
stay relative (``clock = 'relative'``, seconds from the Unix epoch). Every placed boundary is in
``derived``.

The end of a stream (``[DONE]``) is not recorded: ``ts_end`` is the last token chunk, so the
client's postprocess is 0. Request ids are not stored (they are ``--request-id-prefix`` + index):
synthesized ``<file hash>-<index>``.
"""

from __future__ import annotations

from toolkit.importers._document import checked
from toolkit.importers.spec import Docs, Importer, Layout

NAME = "vllm-bench"
VANTAGE = "client"
IDENTITY = "request_id"
READS = "document"
DESCRIPTION = "vLLM `bench serve --save-result --save-detailed` result JSON (per-request lists)"
FILE_HINT = "<backend>-<rate>qps-<model>-<date>.json written by --save-result --save-detailed"
BOUNDARIES = {
    "ts_arrival": "anchor + start_times[i] (perf_counter; anchor: --clock-origin, else the file's date)",
    "ts_first_token": "arrival + ttfts[i]: first chunk with choices, role-only chunk included (derived)",
    "ts_last_token": "arrival + latencies[i]: last token chunk (derived)",
    "ts_end": "arrival + latencies[i]: the stream's end is not recorded (derived; client postprocess 0)",
}
CANNOT = ("no request ids (synthesized); no wall clock without --clock-origin or the file's date (1 s, local time "
          "read as UTC); no stream end; failed requests have no TTFT; no queue times (client)")

_COLUMNS = ("{'date': 'VARCHAR', 'model_id': 'VARCHAR', 'start_times': 'DOUBLE[]', 'ttfts': 'DOUBLE[]', "
            "'latencies': 'DOUBLE[]', 'itls': 'DOUBLE[][]', 'input_lens': 'BIGINT[]', 'output_lens': 'BIGINT[]', "
            "'errors': 'VARCHAR[]'}")


def sniff(head: bytes) -> bool:
    """One object with the per-request lists ``--save-detailed`` writes (``ttfts`` beside ``itls``
    or ``input_lens``): a result saved without them has no per-request times to import."""
    h = head[:65536]
    return h.lstrip().startswith(b"{") and b'"ttfts"' in h and (b'"itls"' in h or b'"input_lens"' in h)


def requests_sql() -> str:
    def us(x: str) -> str:
        return f"TRY_CAST(round(({x}) * 1e6) AS BIGINT)"

    return f"""
WITH d AS (
    SELECT * FROM read_json(getvariable('source_path'), format = 'auto', ignore_errors = true,
                            maximum_object_size = 134217728, compression = getvariable('source_compression'),
                            columns = {_COLUMNS})
), n AS (
    SELECT *, greatest(len(ttfts), len(latencies), len(start_times), len(input_lens), 0) AS cnt,
        -- the file's date: when the result was saved, just after the last request ended (of the
        -- requests whose end is in range: one 1e300 reading must not unplace every other request)
        epoch_us(try_strptime(date, '%Y%m%d-%H%M%S'))
            - {us("list_max([start_times[i] + latencies[i] FOR i IN range(1, len(start_times) + 1) "
                  "IF " + us("start_times[i] + latencies[i]") + " IS NOT NULL])")} AS date_origin
    FROM d
), r AS (
    SELECT n.*, unnest(range(1, cnt + 1)) AS i FROM n
), f AS (
    SELECT i AS ln,
        coalesce(getvariable('clock_origin_us'), date_origin) AS origin,
        start_times[i] AS st_raw, ttfts[i] AS ttft_raw, latencies[i] AS lat_raw,
        {us("start_times[i]")} AS st,
        {us("ttfts[i]")} AS ttft,
        {us("latencies[i]")} AS lat,
        coalesce(errors[i], '') <> '' AS failed,
        itls[i] AS itl, input_lens[i] AS input_tokens, output_lens[i] AS output_tokens,
        model_id, start_times IS NULL AS no_starts
    FROM r
), t AS (
    SELECT *, coalesce(origin, 0) + st AS a FROM f
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN no_starts THEN {{'code': 'missing-field', 'detail': 'start_times is missing (vLLM before start_times '
                                                           'were saved): requests cannot be placed in time'}}
         -- a reading that is there but gives no microseconds (1e300): out of range, never a silent NULL
         WHEN st IS NULL AND st_raw IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'start_times[i] is out of range'}}
         WHEN st IS NULL THEN {{'code': 'missing-field', 'detail': 'start_times[i] is missing'}}
         WHEN lat IS NULL AND lat_raw IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'latencies[i] is out of range'}}
         WHEN lat IS NULL THEN {{'code': 'missing-field', 'detail': 'latencies[i] is missing'}}
         WHEN ttft IS NULL AND ttft_raw IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'ttfts[i] is out of range'}}
         WHEN lat < 0 THEN {{'code': 'negative-duration', 'detail': 'latencies[i] is negative'}}
         WHEN ttft < 0 THEN {{'code': 'negative-duration', 'detail': 'ttfts[i] is negative'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    getvariable('file_hash') || '-' || (ln - 1) AS request_id,
    'client' AS vantage,
    getvariable('service') AS service,
    coalesce(model_id, getvariable('model')) AS model,
    a AS ts_arrival,
    CASE WHEN NOT failed THEN a + ttft END AS ts_first_token,
    CASE WHEN NOT failed THEN a + lat END AS ts_last_token,
    a + lat AS ts_end,
    input_tokens, output_tokens,
    CASE WHEN failed THEN 'error' ELSE 'ok' END AS status,
    CASE WHEN NOT failed AND len(itl) > 0 THEN CAST(list_transform(itl, lambda g: g * 1e3) AS FLOAT[]) END AS itl_ms,
    list_filter([CASE WHEN origin IS NOT NULL THEN 'ts_arrival' END,
                 CASE WHEN NOT failed AND ttft IS NOT NULL THEN 'ts_first_token' END,
                 CASE WHEN NOT failed THEN 'ts_last_token' END,
                 'ts_end'], lambda v: v IS NOT NULL) AS derived,
    CASE WHEN origin IS NULL THEN 'relative' ELSE 'wall' END AS clock
FROM t
"""


# a malformed document: one clear InputError (``_document.checked``) before anything parses it
IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql, reads=READS), bind=checked)
