"""The ground floor of every import: input files before any format is known.

What opens a path (files, directories, globs, stdin), knows a file by its content, decompresses
it, cuts it into bounded lines and hands NumPy arrays to Arrow. Both the importers
(``toolkit/importers/``, which read one format each) and the import pipeline
(``toolkit/ingest/``, which plans, deduplicates and writes) stand on it; it imports neither.
"""
