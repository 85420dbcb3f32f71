"""The counts an import returns: per file and in total (``stagelens import --json`` prints them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

Progress = Callable[[str, int], None]  # (file name, last line read): the terminal's progress bar


@dataclass
class FileResult:
    path: str
    format: str
    size: int
    digest: str
    # what ``digest`` hashes: the decompressed content (entries without this key, written before
    # content identity, hashed a compressed file's bytes; a plain file's digest is the same)
    digest_of: str = "content"
    status: str = "imported"  # or "already-imported", or "empty" (a 0-byte file beside others, format auto)
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
    rejected: bool = False  # over max_bad_fraction: nothing was written
    not_logs: list[str] = field(default_factory=list)  # files in a directory that are not logs: skipped

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
            if f.status == "empty":
                continue
            c = by_format.setdefault(f.format, Counter())
            for k in ("read", "imported", "quarantined", "duplicates", "skipped"):
                c[k] += getattr(f, k)
            by_reason.update(f.by_reason)
        return {
            "dataset": self.dataset,
            "import_id": self.import_id,
            "rejected": self.rejected,
            "read": self.total("read"),
            "imported": self.total("imported"),
            "quarantined": self.total("quarantined"),
            "duplicates": self.total("duplicates"),
            "skipped": self.total("skipped"),
            "by_format": {k: dict(v) for k, v in by_format.items()},
            "by_reason": dict(by_reason),
            "files": [asdict(f) for f in self.files],
            "files_skipped": self.not_logs,
        }
