"""The remembered sha1 of dump files (bertdata.download.digests) and the build's use of it."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from bertdata.download import digests
from conftest import run_cli


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "bertdata" / digests.CACHE_FILE


def test_a_sha1_is_known_until_the_file_changes(tmp_path, cache):
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(b"one")
    assert digests.known_sha1(str(path)) is None
    digests.remember_sha1(str(path), "abc", digests.file_identity(str(path)))
    assert digests.known_sha1(str(path)) == "abc"
    assert digests.known_sha1(str(tmp_path / "." / "dump.xml.bz2")) == "abc"  # by real path
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert digests.known_sha1(str(path)) is None
    path.write_bytes(b"two")
    digests.remember_sha1(str(path), "def", digests.file_identity(str(path)))
    path.write_bytes(b"twoo")
    assert digests.known_sha1(str(path)) is None


def test_a_damaged_or_full_cache_is_only_a_cache(tmp_path, cache):
    path = tmp_path / "d"
    path.write_bytes(b"x")
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    assert digests.known_sha1(str(path)) is None
    for i in range(digests.MAX_ENTRIES + 5):
        digests.remember_sha1(str(tmp_path / f"f{i}"), str(i), [i])
    kept = json.loads(cache.read_text())
    assert len(kept) == digests.MAX_ENTRIES and str(tmp_path / "f0") not in kept


def test_a_rerun_does_not_hash_the_dump_again_and_a_changed_dump_is_hashed(tmp_path, cache):
    from bertdata.text.wikidump import sample_paths

    dump, index, vocab = sample_paths()
    local = tmp_path / dump.name
    local.write_bytes(dump.read_bytes())
    (tmp_path / index.name).write_bytes(index.read_bytes())
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent.parent)}
    args = ("build", "--wiki-only", "--dump", local, "--vocab", vocab, "--stop-after", "download")
    run_cli(*args, "--output", tmp_path / "a", env=env)
    sha1 = hashlib.sha1(local.read_bytes()).hexdigest()
    assert json.loads(cache.read_text())[str(local.resolve())]["sha1"] == sha1
    # A remembered value is used as it is: a planted one shows that nothing was read.
    digests.remember_sha1(str(local), "0" * 40, digests.file_identity(str(local)))
    proc = run_cli(*args, "--output", tmp_path / "b", env=env)
    assert "sha1 000000000000" in proc.stderr
    local.write_bytes(local.read_bytes())  # the same bytes, written again: a new mtime
    proc = run_cli(*args, "--output", tmp_path / "c", env=env)
    assert f"sha1 {sha1[:12]}" in proc.stderr
