"""The ``COMMIT`` journal: an interrupted import rolled forward or undone, under the lock;
a journal is untrusted and may only move files from its own staging folder into the tables.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.store._files import (
    JOURNAL,
    STAGING,
    Notify,
    _crash_point,
    _fsync,
    _kind,
    _remove_if_empty,
    _stderr,
    is_part_path,
)
from toolkit.store.manifest import DatasetDamaged, check_import_entry


class _Journal:
    """Recovery of a ``Dataset`` from its journals (mixed into it: toolkit/store/dataset.py)."""

    root: Path
    if TYPE_CHECKING:  # provided by the Dataset this is mixed into (toolkit/store/dataset.py)

        def manifest(self) -> dict: ...

        def _write_manifest(self, manifest: dict) -> None: ...

    def recover(self, notify: Notify | None = None) -> list[str]:
        """Finish or undo imports that a crash interrupted (call it under the lock); returns, and
        says, what was done."""
        say = notify or _stderr
        done: list[str] = []
        staging = self.root / STAGING
        if not staging.is_dir():
            return done
        for d in sorted(staging.iterdir()):
            mode = os.lstat(d).st_mode
            if not stat.S_ISDIR(mode):
                raise DatasetDamaged(f"{d}: a {_kind(mode)}, not an import's staging folder (remove it)")
            if os.path.lexists(d / JOURNAL):
                self._apply(self._read_journal(d / JOURNAL))
                done.append(f"finished import {d.name}, interrupted after its commit")
            else:
                done.append(f"discarded import {d.name}, interrupted before its commit")
            shutil.rmtree(d, ignore_errors=True)
        _remove_if_empty(staging)
        for line in done:
            say(f"{self.root}: {line}")
        return done

    def _read_journal(self, path: Path) -> dict:
        """The journal at ``_staging/<id>/COMMIT``, refused unless every move takes a file from that
        staging folder to the same path under a table directory (``check_journal``)."""
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise DatasetDamaged(f"{path}: a {_kind(mode)}, not a commit journal (remove {path.parent})")
        try:
            entry = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError):
            raise DatasetDamaged(f"{path}: corrupt commit journal (remove {path.parent} to drop that import)") from None
        self.check_journal(entry, path)
        return entry

    def check_journal(self, entry: object, path: Path) -> None:
        """A journal must stay inside the dataset: sources in its own staging folder, targets the same
        relative path under ``requests/``, ``spans/`` or ``quarantine/`` (``is_part_path``: no ``..``,
        no absolute path), neither a link nor reached through one, no target overwritten."""
        refuse = f"{path}: refused: "
        import_id = path.parent.name
        if not (isinstance(entry, dict) and isinstance(entry.get("moves"), list)
                and isinstance(entry.get("manifest_entry"), dict)):
            raise DatasetDamaged(refuse + "not a commit journal (no moves and manifest entry)")
        prefix = f"{STAGING}/{import_id}/"
        targets: list[str] = []
        for i, move in enumerate(entry["moves"]):
            if not (isinstance(move, list) and len(move) == 2 and is_part_path(move[1]) and move[0] == prefix + move[1]):
                raise DatasetDamaged(refuse + f"move {i} does not take a file from {prefix} to the same path under "
                                              "requests/, spans/ or quarantine/")
            src, dst = self.root / move[0], self.root / move[1]
            table = move[1].split("/", 1)[0]
            inside = (os.path.realpath(src.parent).startswith(os.path.realpath(path.parent) + os.sep)
                      and os.path.realpath(dst.parent).startswith(os.path.realpath(self.root / table) + os.sep))
            if not inside or os.path.islink(src) or os.path.islink(dst):
                raise DatasetDamaged(refuse + f"move {i} goes through a symbolic link")
            if os.path.lexists(src) and os.path.lexists(dst):
                raise DatasetDamaged(refuse + f"move {i} would overwrite a file of the dataset")
            if not os.path.lexists(src) and not os.path.lexists(dst):
                raise DatasetDamaged(refuse + f"move {i} names a file that is in neither place")
            targets.append(move[1])
        try:
            check_import_entry(entry["manifest_entry"], path, "manifest_entry")
        except DatasetDamaged:
            raise DatasetDamaged(refuse + "its manifest entry is not one stagelens writes") from None
        if entry["manifest_entry"]["import_id"] != import_id:
            raise DatasetDamaged(refuse + "its manifest entry is of another import")
        if sorted(targets) != sorted(entry["manifest_entry"]["outputs"]):
            raise DatasetDamaged(refuse + "its moves and its manifest entry's outputs differ")
        others = {rel for imp in self.manifest()["imports"] if imp["import_id"] != import_id for rel in imp["outputs"]}
        if not others.isdisjoint(targets):
            raise DatasetDamaged(refuse + "it names a file another import published")

    def _apply(self, entry: dict) -> None:
        """Publish a checked journal: move the files (skipping those a crash already moved), fsync
        their directories, then add the manifest entry (the rename readers see)."""
        dirs: set[Path] = set()
        for n, (src, dst) in enumerate(entry["moves"], 1):
            s, t = self.root / src, self.root / dst
            if s.exists():
                for d in (t.parent.parent, t.parent):
                    if not d.is_dir():
                        d.mkdir(exist_ok=True)
                        dirs.add(d.parent)
                os.replace(s, t)
                dirs.add(t.parent)
                if n == 1:
                    _crash_point("after-move-1")
        for d in sorted(dirs):
            _fsync(d, directory=True)
        _crash_point("after-moves")
        manifest = self.manifest()
        if not any(i["import_id"] == entry["manifest_entry"]["import_id"] for i in manifest["imports"]):
            manifest["imports"].append(entry["manifest_entry"])
            self._write_manifest(manifest)
