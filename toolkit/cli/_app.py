"""The ``stagelens`` application object and what every command shares: the exit-code table, the
Click-style help, the global options and the checks run before any work.

Exit codes: the table ``EXIT_CODES`` below, which ``--help`` prints and docs/command-line.md repeats (a test
checks all three agree). Errors are one line on stderr naming the file and the reason, never a
traceback; DuckDB's own hint lines (``Did you mean``, the ``LINE 1: … ^`` pointer) are kept for `sql`.

How any command ends when it cannot finish (``ending``): Ctrl-C or SIGTERM, one line and exit 130
or 143; a full disk, one line naming the path, exit 4; each whatever error it caused on its way
out (toolkit/_endings.py), in every command, through ``fail`` and ``_ClickStyleGroup.invoke``.
"""

from __future__ import annotations

import math
import signal
import sys
import types
from pathlib import Path
from typing import Annotated

import typer

from toolkit import _endings

# Fast start: `--help`, `--version` and `schema` import neither DuckDB, pyarrow, polars nor altair
# (0.15 to 0.5 CPU s each); a command imports what it uses, inside its function
# (tests/test_fast_start.py checks it).

EXIT_OK, EXIT_USAGE, EXIT_REGRESSION, EXIT_INPUT, EXIT_NOT_COMPARED = 0, 2, 3, 4, 5
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ok",
    EXIT_USAGE: "usage error: wrong option, value, window, filter or output path",
    EXIT_REGRESSION: "a significant regression was found (with --fail-on-regression)",
    EXIT_INPUT: "input unusable: unknown format, unreadable file, too much quarantined",
    EXIT_NOT_COMPARED: "nothing could be compared (with --fail-on-regression)",
}
"""One table for every command (docs/command-line.md "Exit codes" = ``stagelens --help`` = this)."""
OUTPUT_PATHS = ("Output paths (--out, --html, --md, --json): missing folders are created; a path that cannot\n"
                "be written (a file in the way, no permission, a read-only disk) is exit 2, before any work.")
"""The rule for every path a command writes (docs/command-line.md "Output paths" says it too)."""

_METAVARS = {"str": "TEXT", "text": "TEXT", "path": "PATH", "posixpath": "PATH", "float": "FLOAT", "int": "INTEGER",
             "integer": "INTEGER"}


def _argument_metavar(self, ctx, *, usage: bool = False) -> str:
    """An argument by its name in capitals, as Click writes it (``{PATHS}...``, ``[SQL]``)."""
    var = (self.name or "").upper()
    if usage:
        var = f"{{{var}}}" if self.required else f"[{var}]"
    return var + ("..." if self.nargs != 1 else "")


class _ClickStyleGroup(typer.core.TyperGroup):
    """Click's usual metavars (TEXT, PATH, FLOAT, INTEGER; an argument by its name) in every
    command's help instead of Typer's ``<str>``/``<path>``: what users of other Click tools read.
    Every command runs through ``invoke``: an interrupt or a full disk ends it with one line."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        _RUN.update(command=name)
        return name, cmd, rest

    def invoke(self, ctx):
        """The command; ended by ``ending`` when an interrupt or a full disk stopped it (whatever
        error that caused), or when it finished after swallowing an interrupt (a reader's failure
        read as a cue to fall back)."""
        _endings.reset()
        _RUN.update(command=None, ended=False)
        try:
            try:
                result = super().invoke(ctx)
            except BaseException as e:
                if _RUN["ended"] or (end := ending(e)) is None:
                    raise
                raise fail(*end) from None
            if _endings.interrupted() is not None:
                raise fail(*ending(None) or ("interrupted", 130))
            return result
        finally:
            _endings.reset()  # a program that runs commands in its process (tests) goes on afresh

    def get_command(self, ctx, cmd_name):
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and not any(p.name in VERBOSITY for p in cmd.params):
            cmd.params.extend(_verbosity_options())
        for p in getattr(cmd, "params", []):
            if p.metavar is not None or getattr(p, "is_flag", False):
                continue
            if p.param_type_name == "argument":
                p.make_metavar = types.MethodType(_argument_metavar, p)
            else:
                kind = getattr(getattr(p, "type", None), "name", None)
                if kind is None:  # Typer 0.29 keeps the annotation instead of a Click type
                    annotation = getattr(getattr(p, "type_descriptor", None), "annotation", str)
                    kind = getattr(getattr(annotation, "__args__", (annotation,))[0], "__name__", "str")
                p.metavar = _METAVARS.get(kind.lower(), "TEXT")
        return cmd


QUIET_HELP = "Only the result and errors: no progress, no per-file lines, no notes or warnings on stderr."
VERBOSE_HELP = "More detail on stderr (report: each phase and when it began)."


def _verbosity_options() -> list:
    """``-q``/``-v`` after the command as well (``stagelens import -q …``): the same switches as the
    global ones, added to every command. They only turn a switch on, so ``-q import`` still holds."""
    def turn_on(ctx, param, value):
        if value:
            VERBOSITY[param.name] = True

    return [typer.core.TyperOption(param_decls=names, is_flag=True, default=False, expose_value=False,
                                   callback=turn_on, help=text)
            for names, text in ((["--quiet", "-q"], QUIET_HELP), (["--verbose", "-v"], VERBOSE_HELP))]


app = typer.Typer(
    name="stagelens",
    cls=_ClickStyleGroup,
    help="Split LLM-service latency into stages from production logs; find busy periods; attribute regressions.",
    epilog="\b\nExit codes:\n" + "\n".join(f"  {k}  {v}" for k, v in EXIT_CODES.items())  # \b: not rewrapped
    + "\n\n\b\n" + OUTPUT_PATHS,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # Click-style help: flags without <bool>, option names never cut
    context_settings={"help_option_names": ["-h", "--help"]},
)

VERBOSITY = {"quiet": False, "verbose": False}
"""Set by --quiet/--verbose, before the command (``stagelens -q import …``) or after it (``import -q``)."""
MemoryLimit = Annotated[str | None, typer.Option(
    "--memory-limit", help="DuckDB's memory limit, e.g. 8GB or 60% (default: STAGELENS_MEMORY_LIMIT, else 60% "
    "of memory); beyond it queries spill to a folder inside the dataset.")]


def _check_memory_limit(memory_limit: str | None) -> None:
    """A bad --memory-limit (or STAGELENS_MEMORY_LIMIT) is a usage error before any query runs."""
    from toolkit.resources import MemoryLimitError
    from toolkit.resources import memory_limit as limit

    try:
        limit(memory_limit)
    except MemoryLimitError as e:
        raise fail(str(e), EXIT_USAGE) from None


def _out_of_memory(memory_limit: str | None) -> typer.Exit:
    from toolkit.resources import describe_out_of_memory

    return fail(describe_out_of_memory(memory_limit), EXIT_INPUT)


_RUN: dict = {"command": None, "ended": False}
"""The command being run (``resolve_command``) and whether its ending line was written."""

WRITES_DATASET = {"import", "replay"}
"""Commands whose last step is an import into the user's dataset: their ending says it is as it was
(imports are atomic). Not ``demo``: its dataset is its own, and a report follows its import."""


def ending(exc: BaseException | None) -> tuple[str, int] | None:
    """The line and exit code of a command an interrupt or a full disk stopped, or None. The
    cause is named, never the error it caused: after SIGINT/SIGTERM (``_endings.interrupted``)
    any error is its consequence (DuckDB's ``Query interrupted``, a result still open), and a
    no-space error is found behind the errors raised from it (``_endings.no_space``)."""
    chain = list(_endings._chain(exc))
    committed = next((n for e in chain for n in getattr(e, "__notes__", ()) if n == _endings.COMMITTED_UNFINISHED), "")
    state = committed or ("the dataset is as it was" if _RUN["command"] in WRITES_DATASET else "")
    signum = _endings.interrupted()
    if signum is None:
        signum = next((getattr(e, "signum", signal.SIGINT) for e in chain if isinstance(e, KeyboardInterrupt)), None)
    if signum is not None:
        note = next((e.note for e in chain if isinstance(e, _endings.Interrupted) and e.note), None)
        word = "terminated" if signum == signal.SIGTERM else "interrupted"
        return "; ".join(filter(None, (word, note or state))), 128 + signum
    if _endings.no_space(exc) is not None:
        path = _endings.no_space_path(exc) or "a file"
        return "; ".join(filter(None, (f"{path}: no space left on device", state))), EXIT_INPUT
    return None


def fail(message: str, code: int, *, block: bool = False) -> typer.Exit:
    """The command's one error line (``block``: DuckDB's hint lines kept, for `sql`), and its exit.
    Called while an error is handled: when an interrupt or a full disk is behind that error, the
    line says so instead (``ending``), once, whatever the caller meant to say about it."""
    from toolkit.terminal import clean

    if (end := ending(sys.exc_info()[1])) is not None:
        (message, code), block = end, False
        if _RUN["ended"]:
            return typer.Exit(code)
        _RUN["ended"] = True
        _endings.ignore_signals()  # a second Ctrl-C must not cut the line or add a traceback
    typer.echo("stagelens: " + (clean(message).strip() if block else clean(message, newlines=False)), err=True)
    return typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"stagelens {version('stagelens')}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help=VERBOSE_HELP)] = False,
) -> None:
    """Split LLM-service latency into stages from production logs; find busy periods; attribute regressions."""
    VERBOSITY.update(quiet=quiet, verbose=verbose)


def show_progress(as_json: bool = False) -> bool:
    """Progress bars only for a person: a terminal on stderr, no --json, no --quiet."""
    return not (as_json or VERBOSITY["quiet"]) and sys.stderr.isatty()


def parse_params(items: list[str] | None) -> dict[str, object]:
    params: dict[str, object] = {}
    for item in items or []:
        if "=" not in item:
            raise fail(f"--param takes name=value, got {item!r}", EXIT_USAGE)
        k, v = item.split("=", 1)
        params[k.strip().lstrip("$")] = v
    return params


def period_params(items: list[str] | None) -> dict[str, object]:
    """``--param name=value`` of report, compare and whatif: the period rules' parameters only
    (toolkit/report/periods.py); a wrong name or value is one line, exit 2, naming the valid ones."""
    from toolkit.report.periods import check_period_params

    try:
        return check_period_params(parse_params(items))
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None


def check_output(path: Path | None, option: str, *, directory: bool = False) -> None:
    """Refuse an output path that cannot be written, before any work (a report computed for a
    minute and then lost to a read-only folder is the failure this prevents). A folder that does
    not exist yet is not a reason: ``write_output`` creates it, as ``import --out`` creates its
    dataset's folders. ``-`` is stdout."""
    import tempfile

    if path is None or (str(path) == "-" and not directory):
        return
    target = path.absolute()
    if directory and target.is_dir():
        parent = target
    elif target.is_dir():
        raise fail(f"{option} {path}: is a directory; give a file name", EXIT_USAGE)
    else:
        parent = next((p for p in target.parents if p.exists()), Path("/"))
    if not parent.is_dir():
        raise fail(f"{option} {path}: {parent} is a file, not a folder", EXIT_USAGE)
    try:  # a real probe: permissions alone say yes to root in /proc or on a read-only mount
        probe = Path(tempfile.mkdtemp(prefix=".stagelens-probe-", dir=parent))
        probe.rmdir()
    except OSError as e:
        if _endings.no_space(e):  # named as the output, not as the probe (gone)
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise fail(f"{option} {path}: cannot write in {parent} ({e.strerror or type(e).__name__})", EXIT_USAGE) from None


def check_outputs(*outputs: tuple[Path | None, str], stdout: str | None = None) -> bool:
    """``check_output`` for each (path, option), and at most one output to stdout (``-``, or a flag
    such as ``compare --json``, named in ``stdout``): two would arrive one after the other, with
    nothing to say where one ends, and no reader could take either. True when one goes to stdout
    (then the terminal summary stays off it)."""
    to_stdout = [option for path, option in outputs if path is not None and str(path) == "-"]
    to_stdout += [stdout] if stdout else []
    if len(to_stdout) > 1:
        raise fail(f"{', '.join(to_stdout[:-1])} and {to_stdout[-1]} would {'both' if len(to_stdout) == 2 else 'all'} "
                   "write to stdout, one after the other; give all but one of them a file name", EXIT_USAGE)
    for path, option in outputs:
        check_output(path, option)
    return bool(to_stdout)


def write_output(path: Path, text: str) -> None:
    """Write one output: ``-`` to stdout, else a file, creating the folders it needs
    (``check_output`` said they can be)."""
    if str(path) == "-":
        from toolkit.terminal import write_out

        write_out(text if text.endswith("\n") else text + "\n")  # cleaned on a terminal
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _endings.write_text(path, text)  # a full disk: one line naming it, no half-written file


def check_window(text: str | None, option: str = "--window") -> None:
    """The one window syntax (START/END, ISO-8601), checked as the report checks it: a bad one is a
    usage error (exit 2) in every command."""
    if text is None:
        return
    from toolkit.report.build import _parse_window

    try:
        _parse_window(text)
    except ValueError as e:
        raise fail(f"{option} {str(e).removeprefix('window ')}", EXIT_USAGE) from None


def check_positive(*values: tuple[float | None, str]) -> None:
    """Counts, sizes, times and rates given on the command line are finite numbers above 0."""
    for value, option in values:
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise fail(f"{option} must be a number above 0, not {value}", EXIT_USAGE)


def check_format(fmt: str, option: str = "--format") -> None:
    """An importer name that does not exist is a usage error, caught before any file is read."""
    from toolkit.enginestate import FORMATS
    from toolkit.importers import UnknownFormat, get_importer

    if fmt != "auto" and fmt not in FORMATS:
        try:
            get_importer(fmt)
        except UnknownFormat as e:  # its message names the close match and the known formats
            raise fail(f"{option}: {e}", EXIT_USAGE) from None



def dataset_arg(value: str | None, engine: str, what: str = "DATASET") -> str | Path | None:
    """A dataset as the user gave it. A URI (``s3a://bucket/ds``, ``file:///data/ds``) reaches
    ``--engine spark`` unchanged: declared as a Path it became ``s3a:/bucket/ds``, which no reader
    finds. DuckDB reads datasets on a local path only: a URI there is a usage error, said so."""
    if value is None:
        return None
    if "://" in value:
        if engine != "spark":
            raise fail(f"{what} {value}: a URI is read with --engine spark; DuckDB reads a dataset directory",
                       EXIT_USAGE)
        return value
    return Path(value)


def _run_on_spark(dataset: str | Path, named: str | None, query: str | None, params: dict[str, object],
                  master: str | None):
    """``sql --engine spark``: Spark's errors become one line (its first: the error class and hint)."""
    from toolkit.engines import spark
    from toolkit.store import DatasetError

    try:
        if named:
            return spark.run_query(dataset, named, params, master)
        return spark.run_sql(dataset, query or "", params, master)
    except spark.EngineUnavailable as e:
        raise fail(str(e), EXIT_USAGE) from None
    except (ValueError, DatasetError):
        raise
    except Exception as e:  # pyspark's AnalysisException and kin: the SQL is wrong for the views
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise fail(f"spark: {(str(e).strip().splitlines() or [type(e).__name__])[0]}", EXIT_USAGE) from None
        raise


def _on_spark(run):
    """``report``/``compare --engine spark``: Spark's errors become one line (its first), exit 2."""
    from toolkit.engines import spark

    try:
        return run()
    except spark.EngineUnavailable as e:
        raise fail(str(e), EXIT_USAGE) from None
    except Exception as e:  # pyspark's AnalysisException and kin
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise fail(f"spark: {(str(e).strip().splitlines() or [type(e).__name__])[0]}", EXIT_USAGE) from None
        raise

