"""What the engine says of files: whether one is still the same, its SHA-256, and sizes for people."""

from __future__ import annotations

import hashlib
import os
from typing import Optional

# (real path, size, modification time) -> SHA-256: the one memo of file hashes in this
# process. A model names its answers in a result cache and a manifest by its file's hash,
# and a file of gigabytes takes seconds to read.
_file_hashes: dict[tuple[str, int, int], str] = {}


def file_identity(path: str) -> tuple[str, int, int]:
    """What says a file is still the one hashed: its real path, size and modification time."""
    stat = os.stat(path)
    return os.path.realpath(path), stat.st_size, stat.st_mtime_ns


def file_sha256(path: str) -> str:
    """The SHA-256 of a file, read once per process while its size and modification time stay."""
    identity = file_identity(path)
    if identity not in _file_hashes:
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        _file_hashes[identity] = digest.hexdigest()
    return _file_hashes[identity]


def format_bytes(n_bytes: Optional[int]) -> str:
    """A size as people read it: GB from a billion bytes on, else MB."""
    if n_bytes is None:
        return "size unknown"
    return f"{n_bytes / 1e9:.2f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.1f} MB"
