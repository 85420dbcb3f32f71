"""DuckDB SQL -> Spark SQL: sqlglot's transpiler plus the project's rules (``--engine spark``).

``queries/*.sql`` stay the one definition of every view (docs/portable-sql.md, docs/spark-engine.md). Plain
``sqlglot.transpile(read="duckdb", write="spark")`` errs on several everyday DuckDB idioms and, worse,
gives silently different results on a few (measured for this project: 15 errors and 5 wrong results
over 48 idioms, see ``docs/spark-engine.md``). So the translation is ``parse_one(read="duckdb")``,
then each rule of ``RULES`` rewrites its construct, then ``.sql("spark")``. A construct whose Spark
result would differ and that no rule covers is refused (``Untranslatable``, naming the source file and
the construct): a clear error is better than a different number.

Each rule is one small function over a sqlglot node, kept in a registry like sqlglot's own
``TRANSFORMS``; ``tests/test_spark_translate.py`` has a golden pair (and, with Spark, a run) per rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

ColumnsOf = Callable[[str], list[str]]
"""Given a Spark SQL query, its output column names (the engine asks Spark's analyzer)."""


class Untranslatable(ValueError):
    """A DuckDB construct that has no Spark equivalent with the same result."""

    def __init__(self, source: str, construct: str, why: str) -> None:
        super().__init__(f"{source}: cannot run on Spark: {construct}: {why}")
        self.source, self.construct, self.why = source, construct, why


REFUSED: dict[str, str] = {
    # pattern over the SQL text (comments and string literals blanked) -> why it is refused
    r"\bdate_?diff\s*\(": "DuckDB counts boundaries crossed, Spark truncates the difference; "
                          "use epoch_us(b) - epoch_us(a)",
    r"\bepoch\s*\(": "Spark's UNIX_TIMESTAMP drops the fraction of a second; use epoch_us(x) / 1e6",
    r"\bepoch_ms\s*\(": "DuckDB rounds, Spark truncates; use epoch_us(x) / 1e3",
    r"\bto_timestamp\s*\(": "Spark drops the fraction of a second; use make_timestamp(micros)",
    r"\bextract\s*\(\s*epoch\b": "no exact Spark form; use epoch_us",
    r"\bapprox_quantile\s*\(": "Spark's percentile_approx is a different algorithm; use quantile_cont",
    r"\blen\s*\(": "the argument's type is not known when translating (Spark's length is for strings); "
                   "write array_length for a list, length for a string",
    r"\bgetvariable\s*\(": "an unset variable; pass it as --param name=value",
}


def to_spark(sql: str, source: str = "<sql>", columns_of: ColumnsOf | None = None) -> str:
    """Translate one DuckDB statement to Spark SQL, or raise ``Untranslatable``.

    ``columns_of`` resolves the columns of a subquery (needed by ``UNION ALL BY NAME``); without it
    (the lint test, which has no Spark) such a union is checked but left as DuckDB wrote it.
    """
    code = re.sub(r"--[^\n]*|'(?:[^']|'')*'", " ", sql)
    for pattern, why in REFUSED.items():
        if m := re.search(pattern, code, re.IGNORECASE):
            raise Untranslatable(source, m.group(0).rstrip("( ").strip() + "(...)", why)
    try:
        tree = sqlglot.parse_one(sql, read=_DuckDB)
    except sqlglot.errors.ParseError as e:
        raise Untranslatable(source, "syntax", str(e).splitlines()[0]) from None
    ctx = _Context(source, columns_of, tree)
    tree = tree.transform(lambda node: _apply(node, ctx), copy=True)
    return tree.sql("spark")


class _DuckDB(DuckDB):
    """DuckDB as sqlglot reads it, but with list indexes kept as written (1-based): sqlglot shifts an
    index to 0-based only where it guesses the operand is a list (``l[1]`` but not ``f(x)[1]``), so
    the ``index`` rule could not know which base it sees."""

    INDEX_OFFSET = 0


class _Context:
    def __init__(self, source: str, columns_of: ColumnsOf | None, root: exp.Expr) -> None:
        self.source, self.columns_of, self.root = source, columns_of, root

    def refuse(self, node: exp.Expr, why: str) -> Untranslatable:
        return Untranslatable(self.source, node.sql("duckdb")[:80], why)


Rule = Callable[[exp.Expr, _Context], exp.Expr | None]
"""Returns the replacement node, or None when the rule does not apply to this node."""


def _fn(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _rule_epoch_us(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``epoch_us(ts)`` -> ``unix_micros(ts)``: sqlglot passes EPOCH_US through, which Spark lacks."""
    if isinstance(node, exp.Anonymous) and node.name.lower() == "epoch_us":
        return _fn("unix_micros", *node.expressions)
    return None


def _rule_quantile_cont(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``quantile_cont(x, p)`` / ``(x, [p...])`` -> Spark's exact ``percentile`` (linear interpolation,
    as DuckDB's). sqlglot emits ``PERCENTILE_CONT(x, p)``, which Spark rejects (wrong arity)."""
    if isinstance(node, exp.PercentileCont) and node.expression is not None:
        if isinstance(node.parent, exp.WithinGroup):
            return None
        return _fn("percentile", node.this, node.expression)
    return None


def _rule_time_bucket(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``time_bucket(width, ts, origin)`` stays Spark's ``time_bucket`` (Spark >= 4.2); sqlglot emits
    DATE_BIN. The origin must be written: DuckDB's default is 2000-01-03, Spark's the epoch."""
    if not isinstance(node, exp.DateBin):
        return None
    origin = node.args.get("origin") or node.args.get("unit")
    if not isinstance(origin, exp.Expr) or isinstance(origin, exp.Var):
        raise ctx.refuse(node, "time_bucket needs an explicit origin, TIMESTAMP '1970-01-01 00:00:00' "
                               "(the engines' default origins differ)")
    return _fn("time_bucket", node.this, node.expression, origin)


def _rule_list_avg(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``list_avg(l)`` -> the sum of the non-null elements over their count (null for an empty list),
    as DuckDB's list_avg; sqlglot passes LIST_AVG through."""
    if not (isinstance(node, exp.Anonymous) and node.name.lower() == "list_avg"):
        return None
    (lst,) = node.expressions
    kept = sqlglot.parse_one("filter(__l, __v -> __v IS NOT NULL)", read="spark")
    kept = kept.transform(lambda n: lst.copy() if isinstance(n, exp.Column) and n.name == "__l" else n)
    total = sqlglot.parse_one("aggregate(__k, CAST(0 AS DOUBLE), (__a, __v) -> __a + __v)", read="spark")
    total = total.transform(lambda n: kept.copy() if isinstance(n, exp.Column) and n.name == "__k" else n)
    size = exp.Nullif(this=_fn("size", kept.copy()), expression=exp.Literal.number(0))
    return exp.Paren(this=exp.Div(this=total, expression=size))


def _rule_index(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``l[i]`` (1-based) and ``m['k']`` -> ``try_element_at``: NULL past the end or for a missing
    key, as in DuckDB; sqlglot's ``l[i-1]`` raises INVALID_ARRAY_INDEX under Spark's ANSI mode."""
    if not isinstance(node, exp.Bracket) or len(node.expressions) != 1:
        return None
    (key,) = node.expressions
    if isinstance(key, exp.Literal) and key.is_string:
        return _fn("try_element_at", node.this, key)
    negative = isinstance(key, exp.Neg)
    lit = key.this if negative else key
    if isinstance(lit, exp.Literal) and not lit.is_string:
        # DuckDB's index as written (see _DuckDB): 1-based, negative from the end, as try_element_at
        return _fn("try_element_at", node.this, exp.Literal.number((-1 if negative else 1) * int(lit.this)))
    raise ctx.refuse(node, "an index that is not a literal (1-based in DuckDB, 0-based in Spark)")


def _rule_hash(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``hash(...)`` (DuckDB: 64 bits) -> ``xxhash64(...)``: Spark's ``hash`` has 32 bits, which
    collide at millions of rows. Values differ between engines (keys are engine-specific); equal
    inputs still give equal keys, which is all the queries use them for."""
    if isinstance(node, exp.Anonymous) and node.name.lower() == "hash":
        return _fn("xxhash64", *node.expressions)
    return None


def _rule_hash_mod(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``hash(...) % n`` -> ``pmod(xxhash64(...), n)``: DuckDB's hash is unsigned, so ``hash % n`` lies
    in [0, n) and ``hash(...) % n < k`` picks about k rows in n (the report's bootstrap sample and
    chart share, toolkit/report/attribution.py). Spark's xxhash64 is signed: plain ``%`` is negative for half
    the rows, and that filter would keep half of them, unbounded. ``pmod`` is in [0, n) again."""
    if (isinstance(node, exp.Mod) and isinstance(node.this, exp.Anonymous)
            and node.this.name.lower() == "hash"):
        return _fn("pmod", _fn("xxhash64", *(e.copy() for e in node.this.expressions)), node.expression.copy())
    return None


def _rule_sample(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``FROM x USING SAMPLE reservoir(N ROWS) REPEATABLE (s)`` -> ``FROM (SELECT * FROM x ORDER BY
    rand(s) LIMIT N)``: sqlglot writes ``TABLESAMPLE (N ROWS)``, which in Spark is the *first* N rows,
    not a random sample. Both are uniform samples of N rows, seeded; the rows differ between engines
    (``compare``'s curve sample, toolkit/compare.py). Other sample forms are refused."""
    sample = node.args.get("sample") if isinstance(node, exp.Select) else None
    if sample is None:
        return None
    method = str(sample.args.get("method") or "").upper()
    size = sample.args.get("size")
    if (method not in ("RESERVOIR", "") or not isinstance(size, exp.Literal) or sample.args.get("percent")
            or node.args.get("joins") or node.args.get("from_") is None):
        raise ctx.refuse(node, "a sample other than reservoir(N ROWS) over one FROM item")
    seed = sample.args.get("seed")
    source = node.args["from_"].this.copy()
    picked = (exp.select("*").from_(source)
              .order_by(_fn("rand", *([seed.copy()] if seed is not None else []))).limit(size.copy()))
    out = node.copy()
    out.set("sample", None)
    out.set("from_", exp.From(this=exp.Subquery(this=picked, alias=exp.TableAlias(this=exp.to_identifier(
        source.alias_or_name if isinstance(source, exp.Table) and source.alias else "__sample")))))
    return out


def _rule_enum_cast(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``CAST(x AS ENUM('b', 'c'))`` -> ``CAST(x AS STRING)``: Spark has no ENUM type. The values and
    equality tests are the same text (the report's ``_rb.side``, toolkit/report/materialize.py); an
    ENUM sorts by its list's order, text alphabetically, so only lists already in that order pass."""
    to = node.args.get("to") if isinstance(node, exp.Cast) else None
    if not (isinstance(to, exp.DataType) and to.this == exp.DataType.Type.ENUM):
        return None
    labels = [e.this for e in to.expressions]
    if labels != sorted(labels):
        raise ctx.refuse(node, "an ENUM whose order is not alphabetical (it would sort differently as text)")
    return exp.Cast(this=node.this.copy(), to=exp.DataType.build("STRING"))


STRFTIME_CODES = {"%Y": "yyyy", "%m": "MM", "%d": "dd", "%H": "HH", "%M": "mm", "%S": "ss", "%f": "SSSSSS",
                  "%j": "DDD", "%%": "%"}
"""DuckDB strftime codes and the Java pattern letters Spark's date_format gives the same text with."""


def _rule_strftime(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``strftime(ts, '%Y-%m-%dT%H:%M:%SZ')`` -> ``date_format(ts, "yyyy-MM-dd'T'HH:mm:ss'Z'")``: sqlglot
    maps the codes but leaves literal letters (``T``, ``Z``) bare, which Spark reads as pattern letters
    (``Z``: a zone offset) or refuses. Literal text with letters is quoted; a code without a listed
    equivalent is refused."""
    if not isinstance(node, exp.TimeToStr):
        return None
    fmt = node.args.get("format")
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise ctx.refuse(node, "a strftime format that is not a literal")
    out = []
    for part in re.split(r"(%.)", fmt.this):
        if part.startswith("%"):
            if part not in STRFTIME_CODES:
                raise ctx.refuse(node, f"strftime code {part} has no listed Spark equivalent")
            out.append(STRFTIME_CODES[part])
        elif re.search(r"[A-Za-z']", part):
            out.append("'" + part.replace("'", "''") + "'")
        else:
            out.append(part)
    return _fn("date_format", node.this.copy(), exp.Literal.string("".join(out)))


def _rule_make_timestamp(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``make_timestamp(micros)`` -> ``CAST(timestamp_micros(micros) AS TIMESTAMP_NTZ)``: DuckDB gives a
    TIMESTAMP without zone, Spark's timestamp_micros one with the session zone (UTC here)."""
    if isinstance(node, exp.UnixToTime) and str(node.args.get("scale") or "") in ("6", exp.UnixToTime.MICROS):
        return exp.Cast(this=_fn("timestamp_micros", node.this),
                        to=exp.DataType.build("TIMESTAMP_NTZ", dialect="spark"))
    if isinstance(node, exp.UnixToTime):
        raise ctx.refuse(node, "only make_timestamp(epoch microseconds) has an exact Spark form")
    return None


def _rule_struct_to_map(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``CAST({'k': v, ...} AS MAP(K, V))`` -> ``map('k', CAST(v AS V), ...)``: Spark cannot cast a
    struct to a map."""
    if not (isinstance(node, exp.Cast) and isinstance(node.this, exp.Struct)
            and node.to.this == exp.DataType.Type.MAP):
        return None
    value_type = node.to.expressions[1]
    args: list[exp.Expr] = []
    for field in node.this.expressions:
        if not isinstance(field, exp.PropertyEQ):
            raise ctx.refuse(node, "a struct literal without field names")
        args += [exp.Literal.string(field.this.name), exp.Cast(this=field.expression, to=value_type.copy())]
    return _fn("map", *args)


def _rule_ordered_list(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``list(x ORDER BY k)`` -> the values of ``array_sort(collect_list(struct(k, x)))``: sqlglot
    drops the ORDER BY (and collect_list drops NULLs, which DuckDB's list keeps: the struct keeps them).
    ``list(...) FILTER (WHERE c)``: the FILTER goes on collect_list, the aggregate inside (Spark
    refuses a FILTER on ``transform``; the report's bracket scan, toolkit/report/quantiles.py, writes one)."""
    where = None
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.ArrayAgg):
        node, where = node.this, node.expression
    if not isinstance(node, exp.ArrayAgg):
        return None

    def gathered(agg: exp.Expr) -> exp.Expr:
        return agg if where is None else exp.Filter(this=agg, expression=where.copy())

    inner = node.this
    if isinstance(inner, exp.Order):
        keys = inner.expressions
        if any(k.args.get("desc") for k in keys):
            raise ctx.refuse(node, "list(... ORDER BY ... DESC): only ascending orders are translated")
        value, gather = inner.this, "collect_list"
        if isinstance(value, exp.Distinct):  # list(DISTINCT x ORDER BY x): a set of the values, sorted
            if len(value.expressions) != 1 or [k.this.sql() for k in keys] != [value.expressions[0].sql()]:
                raise ctx.refuse(node, "list(DISTINCT x ORDER BY ...): only ordered by x itself is translated")
            value, gather = value.expressions[0], "collect_set"
        fields = [exp.alias_(k.this.copy(), f"__k{i}") for i, k in enumerate(keys)]
        packed = _fn("array_sort", gathered(_fn(gather, _fn("struct", *fields, exp.alias_(value.copy(), "__v")))))
    elif isinstance(inner, exp.Distinct):
        raise ctx.refuse(node, "list(DISTINCT x) without ORDER BY x: write list(DISTINCT x ORDER BY x)")
    else:
        packed = gathered(_fn("collect_list", _fn("struct", exp.alias_(inner.copy(), "__v"))))
    return sqlglot.parse_one("transform(__p, __e -> __e.__v)", read="spark").transform(
        lambda n: packed if isinstance(n, exp.Column) and n.name == "__p" else n)


def _rule_regexp_replace(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``regexp_replace(s, re, r)`` replaces the first match in DuckDB and every match in Spark: kept
    when the pattern can match once only (anchored with ^ or $, no alternation) or with the 'g' flag."""
    if not isinstance(node, exp.RegexpReplace):
        return None
    flags = node.args.get("modifiers")
    if flags is not None:
        if not (isinstance(flags, exp.Literal) and flags.this == "g"):
            raise ctx.refuse(node, "regexp_replace options other than 'g'")
        return exp.RegexpReplace(this=node.this, expression=node.expression, replacement=node.args["replacement"])
    pattern = node.expression
    once = isinstance(pattern, exp.Literal) and "|" not in pattern.this and (
        pattern.this.startswith("^") or pattern.this.endswith("$"))
    if not once:
        raise ctx.refuse(node, "DuckDB replaces the first match, Spark every match: anchor the pattern "
                               "(^ or $) or add the 'g' option")
    return exp.RegexpReplace(this=node.this, expression=pattern, replacement=node.args["replacement"])


def _rule_union_by_name(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``a UNION ALL BY NAME b`` -> both sides select the union of their columns, by name, in the left
    side's order (a column one side lacks is NULL there). Spark SQL has no BY NAME; the columns come
    from Spark's analyzer at run time (``columns_of``)."""
    if not (isinstance(node, exp.Union) and node.args.get("by_name")):
        return None
    if ctx.columns_of is None:
        return None
    if node.args.get("distinct"):
        raise ctx.refuse(node, "UNION BY NAME without ALL")
    sides = [node.this, node.expression]
    cols = [ctx.columns_of(_with_ctes(side, node).sql("spark")) for side in sides]
    names = list(dict.fromkeys(cols[0] + cols[1]))
    out = []
    for side, have in zip(sides, cols, strict=True):
        lowered = {c.lower() for c in have}
        picks = [exp.column(n, quoted=True) if n.lower() in lowered else exp.alias_(exp.Null(), n, quoted=True)
                 for n in names]
        out.append(exp.select(*picks).from_(exp.Subquery(this=side.copy(), alias=exp.TableAlias(
            this=exp.to_identifier("__side")))))
    return exp.Union(this=out[0], expression=out[1], distinct=False)


def _with_ctes(side: exp.Expr, union: exp.Expr) -> exp.Expr:
    """A union side as a standalone Spark query: with the CTEs defined before the one holding the
    union (those the side may read), translated."""
    q = side.copy()
    root, holder = union.root(), union.find_ancestor(exp.CTE)
    with_ = root.args.get("with_")
    if with_ is not None and isinstance(q, exp.Select):
        before = []
        for cte in with_.expressions:
            if cte is holder:
                break
            before.append(cte.copy())
        if before:
            q.set("with_", exp.With(expressions=before))
    return q.transform(lambda n: _apply(n, _Context("<union side>", None, root)), copy=False)


def _rule_nested_unnest(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``f(unnest(l))`` in a select list -> ``unnest(transform(l, v -> f(v)))``: Spark does not allow a
    generator inside an expression (UNSUPPORTED_GENERATOR.NESTED_IN_EXPRESSIONS); the rows are the same."""
    if not isinstance(node, exp.Select):
        return None
    items = []
    changed = False
    for item in node.expressions:
        expr = item.this if isinstance(item, exp.Alias) else item
        gens = [g for g in expr.find_all(exp.Explode, exp.Unnest) if g is not expr]
        if len(gens) == 1 and not isinstance(expr, exp.Explode | exp.Unnest):
            (gen,) = gens
            lst = gen.this if isinstance(gen, exp.Explode) else gen.expressions[0]
            var = exp.to_identifier("__u")
            body = expr.copy()
            body.find(type(gen)).replace(exp.column("__u"))
            lam = exp.Lambda(this=body, expressions=[var])
            expr = exp.Explode(this=exp.Transform(this=lst.copy(), expression=lam))
            item = exp.alias_(expr, item.alias) if isinstance(item, exp.Alias) else expr
            changed = True
        elif len(gens) > 1:
            raise ctx.refuse(item, "more than one unnest in one select item")
        items.append(item)
    if not changed:
        return None
    out = node.copy()
    out.set("expressions", items)
    return out


def _rule_count_if(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``count_if(c)`` -> ``sum(CASE WHEN c THEN 1 WHEN NOT c THEN 0 END)``: DuckDB's count_if is NULL
    when every input is NULL (or there is none), Spark's is 0."""
    if not isinstance(node, exp.CountIf):
        return None
    cond = node.this
    case = exp.Case(ifs=[exp.If(this=cond.copy(), true=exp.Literal.number(1)),
                         exp.If(this=exp.Not(this=exp.Paren(this=cond.copy())), true=exp.Literal.number(0))])
    return exp.Sum(this=case)


def _rule_string_agg(node: exp.Expr, ctx: _Context) -> exp.Expr | None:
    """``string_agg([DISTINCT] x, sep [ORDER BY x])`` -> ``array_join`` over the sorted values (NULL
    when there are none, as DuckDB); Spark 4.3's LISTAGG(DISTINCT ...) WITHIN GROUP failed inside
    the planner (ClassCastException) on the consistency view."""
    if not isinstance(node, exp.GroupConcat):
        return None
    inner, keys = node.this, []
    if isinstance(inner, exp.Order):
        inner, keys = inner.this, inner.expressions
    distinct = isinstance(inner, exp.Distinct)
    value = inner.expressions[0] if distinct else inner
    if any(k.args.get("desc") for k in keys) or any(k.this != value for k in keys) or len(keys) > 1:
        raise ctx.refuse(node, "string_agg ordered by anything but its own value (ascending)")
    sep = node.args.get("separator") or exp.Literal.string(",")
    gather = _fn("collect_set" if distinct else "collect_list", value.copy())
    joined = _fn("array_join", _fn("array_sort", gather) if keys or distinct else gather, sep.copy())
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=exp.Count(this=value.copy()), expression=exp.Literal.number(0)),
                                true=exp.Null())], default=joined)


RULES: dict[str, Rule] = {
    "epoch_us": _rule_epoch_us,
    "quantile_cont": _rule_quantile_cont,
    "time_bucket": _rule_time_bucket,
    "list_avg": _rule_list_avg,
    "index": _rule_index,
    "hash_mod": _rule_hash_mod,
    "enum_cast": _rule_enum_cast,
    "sample": _rule_sample,
    "strftime": _rule_strftime,
    "hash": _rule_hash,
    "make_timestamp": _rule_make_timestamp,
    "struct_to_map": _rule_struct_to_map,
    "ordered_list": _rule_ordered_list,
    "regexp_replace": _rule_regexp_replace,
    "union_by_name": _rule_union_by_name,
    "nested_unnest": _rule_nested_unnest,
    "count_if": _rule_count_if,
    "string_agg": _rule_string_agg,
}
"""The project's rules, by the DuckDB construct each rewrites (docs/spark-engine.md lists them)."""


def _apply(node: exp.Expr, ctx: _Context) -> exp.Expr:
    for rule in RULES.values():
        out = rule(node, ctx)
        if out is not None:
            # sqlglot's transform does not visit the inside of a replaced node: the rules run there
            # too (a quantile_cont inside an index, an epoch_us inside a hash); they are idempotent
            return out.transform(lambda n, top=out: n if n is top else _apply(n, ctx), copy=False)
    return node
