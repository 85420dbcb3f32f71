"""The manifest's checks: a dataset may come from someone else, so its manifest and import
entries are validated before anything is read (``DatasetDamaged``: one line naming the file).
"""

from __future__ import annotations

from pathlib import Path

from toolkit import schema
from toolkit.store._files import _IMPORT_ID, is_part_path


class DatasetError(Exception):
    """The dataset directory cannot be used now (not a dataset, locked, unwritable): exit 2."""

    exit_code = 2


class DatasetDamaged(DatasetError):
    """A file of the dataset is not what stagelens writes (corrupt, truncated, crafted, of a newer
    schema, a directory where a file belongs...): exit 4, the input is unusable. The message names
    the file and never quotes its content (it may be anything)."""

    exit_code = 4


def _bad_manifest(path: Path, why: str) -> DatasetDamaged:
    return DatasetDamaged(f"{path}: not a stagelens manifest ({why})")


def check_manifest(data: object, path: Path) -> dict:
    """``data`` (parsed ``manifest.json``) if it is a manifest this version can read, else
    ``DatasetDamaged``. Only what stagelens reads is checked: an entry may carry more fields (a
    newer version's, e.g. a content digest per file) and still be read."""
    if not isinstance(data, dict):
        raise _bad_manifest(path, f"a JSON {type(data).__name__}, not an object")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _bad_manifest(path, "no integer schema_version")
    _check_version(version, path)
    imports = data.get("imports")
    if not isinstance(imports, list):
        raise _bad_manifest(path, "no imports list")
    seen: set[str] = set()
    listed: set[str] = set()
    for i, imp in enumerate(imports):
        check_import_entry(imp, path, f"imports[{i}]")
        if imp["import_id"] in seen:
            raise _bad_manifest(path, f"imports[{i}] repeats an import id")
        if not listed.isdisjoint(imp["outputs"]):
            raise _bad_manifest(path, f"imports[{i}] lists a file an earlier import lists (it would be read twice)")
        seen.add(imp["import_id"])
        listed.update(imp["outputs"])
    return data


def _check_version(version: object, path: Path) -> None:
    if isinstance(version, int) and version > schema.version():
        raise DatasetDamaged(f"{path}: written with schema version {version}, newer than this stagelens reads "
                             f"({schema.version()}); upgrade stagelens to read it")


def check_import_entry(imp: object, path: Path, where: str) -> None:
    """One import of the manifest: an id, its files (path, format, size) and the table files it wrote."""
    if not isinstance(imp, dict):
        raise _bad_manifest(path, f"{where} is not an object")
    if not isinstance(imp.get("import_id"), str) or not _IMPORT_ID.fullmatch(imp["import_id"]):
        raise _bad_manifest(path, f"{where} has no valid import_id")
    if "schema_version" in imp:
        _check_version(imp["schema_version"], path)
    files = imp.get("files")
    if not isinstance(files, list):
        raise _bad_manifest(path, f"{where} has no files list")
    for j, f in enumerate(files):
        if not (isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("format"), str)
                and isinstance(f.get("size"), int) and isinstance(f.get("digest", ""), str)):
            raise _bad_manifest(path, f"{where}.files[{j}] lacks a path, format or size")
    outputs = imp.get("outputs")
    if not isinstance(outputs, list):
        raise _bad_manifest(path, f"{where} has no outputs list")
    for j, rel in enumerate(outputs):
        if not is_part_path(rel):
            raise _bad_manifest(path, f"{where}.outputs[{j}] is not a table file "
                                      "(<requests|spans|quarantine>/date=YYYY-MM-DD/<name>.parquet)")
