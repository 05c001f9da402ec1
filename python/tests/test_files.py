"""File facts (files.py): the one SHA-256 memo and the one byte-size formatter."""

import hashlib
import os

from newrllama4.files import file_sha256, format_bytes


def test_a_file_is_hashed_once_per_process_until_its_size_or_time_changes(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 100)
    first = file_sha256(str(path))
    assert first == hashlib.sha256(b"a" * 100).hexdigest()
    stat = os.stat(path)
    path.write_bytes(b"b" * 100)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and time: not read again
    assert file_sha256(str(path)) == first
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert file_sha256(str(path)) == hashlib.sha256(b"b" * 100).hexdigest()


def test_sizes_read_in_megabytes_below_a_gigabyte_and_in_gigabytes_above():
    assert format_bytes(None) == "size unknown"
    assert format_bytes(123_456) == "0.1 MB"
    assert format_bytes(999_999_999) == "1000.0 MB"
    assert format_bytes(2_345_678_901) == "2.35 GB"
