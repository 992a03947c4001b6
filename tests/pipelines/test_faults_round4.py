"""Faults round 4 (issue 55), end to end: Ctrl-C at any moment of a build's start is one line, and
a build that ignores it goes on; every command's output gets the same checks (a file system that
holds no files is named, root included); `inspect` says a file is empty or broken whatever its
name; a finished build of another dump or vocab is not replaced unasked; bytes that are not UTF-8
name the page; no thread's traceback reaches the terminal; the build's lock is never read half
written."""

from __future__ import annotations

import bz2
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_SHARDS, SAMPLE_VOCAB, SHARD_A, VOCAB, run_cli
from processes import child_pids, cmdline, leftovers

LINUX_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc and /sys")


def _build(out: Path, *args: str, tmpdir: Path, ctrl_c: str = "default", **popen) -> subprocess.Popen:
    """A sample build in a process group of its own, as a shell starts a job, with Ctrl-C as
    `ctrl_c` leaves it ("default", or "ignored" as `&` does)."""
    def signals() -> None:
        for signum in (signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL if ctrl_c == "default" else signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-m", "bertdata.cli", "build", "--wiki-only", "--sample", "--output",
                             str(out), *SAMPLE_SHARDS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "TMPDIR": str(tmpdir)}, start_new_session=True,
                            preexec_fn=signals, **popen)


def _wait_for_the_pools_server(proc: subprocess.Popen) -> None:
    deadline = time.time() + 120
    while not any("--serve" in cmdline(c) for c in child_pids(proc.pid)):
        assert proc.poll() is None and time.time() < deadline, "the build ended before its pool's server started"
        time.sleep(0.001)


# --- 1. Ctrl-C while the pool's server starts; 2. a build that ignores Ctrl-C ----------------------

@pytest.mark.slow
@LINUX_PROC
@pytest.mark.parametrize("delay", [0, 0.2, 0.6])
def test_ctrl_c_while_the_pools_server_starts_is_one_line(tmp_path, short_tmpdir, delay):
    """The server imported Beam (Python's own start-up, before that) with Ctrl-C still Python's
    KeyboardInterrupt: a 15-line traceback before the command's line."""
    out = tmp_path / "out"
    proc = _build(out, "--workers", "2", tmpdir=short_tmpdir)
    try:
        _wait_for_the_pools_server(proc)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "bertdata build: interrupted" and "Traceback" not in stderr, stderr
    assert not leftovers(out) and not list(short_tmpdir.iterdir())


@pytest.mark.slow
@LINUX_PROC
def test_a_build_started_with_ctrl_c_ignored_goes_on_through_ctrl_c(tmp_path, short_tmpdir):
    """As a shell's `&` starts it: the launcher and the server ignored Ctrl-C, the forked workers
    died of it ("worker process N exited with status 1")."""
    out = tmp_path / "out"
    proc = _build(out, "--workers", "2", "--phase", "1", tmpdir=short_tmpdir, ctrl_c="ignored")
    sent = 0
    try:
        while proc.poll() is None:  # the terminal's Ctrl-C, again and again, to the whole job
            os.killpg(proc.pid, signal.SIGINT)
            sent += 1
            time.sleep(0.05)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and sent > 10, stderr
    assert "done in" in stdout and "Traceback" not in stderr
    assert not leftovers(out) and not list(short_tmpdir.iterdir())


# --- 3. inspect on an empty or broken file --------------------------------------------------------

@pytest.mark.parametrize("name", ["e.parquet", "e.hdf5", "e.bin", "e.idx", "e.txt"])
def test_inspect_says_a_file_is_empty_whatever_its_name(tmp_path, name):
    empty = tmp_path / name
    empty.touch()
    proc = run_cli("inspect", empty, check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"bertdata inspect: invalid shard: {empty}: empty (0 bytes)"
    assert "readable hdf5" not in proc.stdout + proc.stderr


def test_inspect_says_a_broken_parquet_file_is_not_one_and_checks_the_others(tmp_path):
    broken = tmp_path / "rows.parquet"
    broken.write_bytes(os.urandom(64).replace(b"P", b"Q"))
    proc = run_cli("inspect", broken, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"bertdata inspect: error: {broken}: named as a parquet file but not one (it does not begin with PAR1): "
        "broken, or another kind of file"), proc.stderr
    # An empty file among valid shards: every one checked, the empty one named.
    folder = tmp_path / "shards"
    folder.mkdir()
    run_cli("instances", SHARD_A, "--output", folder / "a_training_0.hdf5", "--vocab", VOCAB)
    (folder / "b_training_0.hdf5").touch()
    proc = run_cli("inspect", folder, check=False)
    assert proc.returncode == 1 and "a_training_0.hdf5" in proc.stdout
    assert f"invalid shard: {folder / 'b_training_0.hdf5'}: empty (0 bytes)" in proc.stdout


# --- 4.-6. one set of output checks ---------------------------------------------------------------

@LINUX_PROC
def test_every_command_says_its_output_is_on_a_file_system_that_holds_no_files(tmp_path):
    """As root `os.access` says /proc and /sys are writable: instances ended in h5py's traceback,
    vocab in a PermissionError's, shard in "only 0 kB is free there"."""
    text = tmp_path / "one.txt"
    shutil.copyfile(SHARD_A, text)

    def refused(command: str, *args) -> str:
        before = sorted(tmp_path.rglob("*"))
        proc = run_cli(command, *args, check=False, cwd=tmp_path)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr and sorted(tmp_path.rglob("*")) == before
        return proc.stderr.strip()

    line = refused("instances", text, "--output", "/proc/x.hdf5", "--vocab", SAMPLE_VOCAB)
    assert line.startswith("bertdata instances: error: /proc/x.hdf5: cannot create files in /proc (")
    assert line.endswith("): it is on a proc file system, which holds no files; choose another --output")
    line = refused("vocab", text, "--output", "/sys/kernel/v.txt", "--size", "100")
    assert line.startswith("bertdata vocab: error: /sys/kernel/v.txt: cannot create files in /sys/kernel (")
    assert line.endswith("): it is on a sysfs file system, which holds no files; choose another --output")
    shards = tmp_path / "shards"
    shards.mkdir()
    run_cli("instances", text, "--output", shards / "a_training_0.hdf5", "--vocab", VOCAB)
    line = refused("shard", shards, "--output", "/proc/parts", "--parts", "2")
    assert line.startswith("bertdata shard: error: /proc/parts: cannot create the output folder ("), line
    line = refused("download", "--output", "/proc/dl", "--mirror", "http://127.0.0.1:9")
    assert line.startswith("bertdata download: error: /proc/dl: cannot create the output folder ("), line


def test_a_shard_output_folder_refused_for_space_says_so_and_is_not_left_behind(tmp_path):
    from bertdata.errors import BertdataError
    from bertdata.reshard import publish

    out = tmp_path / "a" / "parts"
    with pytest.raises(BertdataError, match=rf"^{out}: the temporary files need about 1,000,000,000.0 GB, but only "
                                            r".* is free there; free some space or choose another --output$"):
        publish.check_free_space(out, 10**18)
    assert not (tmp_path / "a").exists()
    publish.check_free_space(out, 1)
    assert out.is_dir() and not list(out.iterdir())


# --- 7. another dump or vocab into a finished build ----------------------------------------------

@pytest.fixture(scope="module")
def other_dump(tmp_path_factory) -> Path:
    """The sample dump less its last page: another dump, the same options."""
    from bertdata.text.multistream import write_multistream
    from bertdata.text.wikidump import iter_pages, read_siteinfo, sample_paths

    folder = tmp_path_factory.mktemp("other")
    dump = sample_paths()[0]
    path = folder / "other-pages-articles-multistream.xml.bz2"
    write_multistream(list(iter_pages(dump))[:-1], read_siteinfo(dump), path,
                      folder / "other-pages-articles-multistream-index.txt.bz2", pages_per_stream=10)
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_finished_build_of_another_dump_or_vocab_is_refused_unless_forced(tmp_path, other_dump):
    """The cleaning-rules test held for equal options too, so the dump was never compared: a
    second dump replaced the build, with "cleaning rules 4, now 4: rebuilding them"."""
    out = tmp_path / "out"
    common = ("--wiki-only", "--output", out, "--workers", "1", "--phase", "1")
    run_cli("build", "--sample", *common, *SAMPLE_SHARDS)
    before = _tree(out)

    def refused(*args) -> str:
        proc = run_cli("build", *common, *args, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert _tree(out) == before, "a refused build changed the finished one"
        return proc.stderr.strip().splitlines()[-1]

    line = refused("--dump", other_dump, "--vocab", SAMPLE_VOCAB, *SAMPLE_SHARDS)
    assert "holds text shards of another dump (enwiki-sample-pages-articles-multistream.xml.bz2, sha1 " in line
    assert "this build's is other-pages-articles-multistream.xml.bz2, sha1 " in line and "--force" in line
    assert "rebuilding" not in line
    # Other shard counts write another text folder, which no stage of this build had seen.
    line = refused("--dump", other_dump, "--vocab", SAMPLE_VOCAB, "--training-shards", "4", "--test-shards", "1")
    assert line.startswith(f"bertdata build: error: {out}: holds a finished build made from another dump "
                           "(enwiki-sample-pages-articles-multistream.xml.bz2, sha1 "), line
    # Another vocab, for the other phase, whose folder holds nothing yet.
    line = refused("--sample", *SAMPLE_SHARDS, "--vocab", VOCAB, "--phase", "2")
    assert line.startswith(f"bertdata build: error: {out}: holds a finished build made with another vocab "
                           f"(sha256 "), line
    assert f"now {VOCAB}, sha256 " in line and "pass --force" in line
    # The same dump and options: reused, as before.
    proc = run_cli("build", "--sample", *common, *SAMPLE_SHARDS)
    assert "rebuilding" not in proc.stderr and _tree(out).keys() == before.keys()
    # --force builds over it.
    run_cli("build", *common, "--dump", other_dump, "--vocab", SAMPLE_VOCAB, *SAMPLE_SHARDS, "--force")
    text = next(out.glob("sharded_*/wikicorpus_en/manifest.json"))
    assert json.loads(text.read_text())["dump"]["name"] == other_dump.name


# --- 8. bytes that are not UTF-8 ----------------------------------------------------------------

def _sample_xml() -> bytes:
    from bertdata.text.wikidump import sample_paths

    return bz2.open(sample_paths()[0]).read()


def _corrupted(where: str) -> bytes:
    """The sample's XML with a Latin-1 'é' in the text of its 5th page or in the title of its 6th."""
    xml = _sample_xml()
    if where == "text":
        at = xml.find(b">", xml.find(b"<text", _nth(xml, b"<page>", 5))) + 1
    else:
        at = xml.find(b"<title>", _nth(xml, b"<page>", 6)) + len(b"<title>")
    return xml[:at] + b"caf\xe9 " + xml[at:]


def _nth(data: bytes, what: bytes, n: int) -> int:
    at = -1
    for _ in range(n):
        at = data.find(what, at + 1)
    return at


def _page_fields(xml: bytes, n: int) -> tuple[str, int]:
    import re

    page = xml[_nth(xml, b"<page>", n):]
    return (re.search(rb"<title>(.*?)</title>", page)[1].decode(), int(re.search(rb"<id>(\d+)</id>", page)[1]))


def _error(data: bytes, fast: bool, cuts: list[int]) -> str:
    from bertdata.errors import BertdataError
    from bertdata.text.wikidump import DumpParser

    parser = DumpParser("dump.xml", fast=fast)
    with pytest.raises(BertdataError) as err:
        for a, b in zip([0, *cuts], [*cuts, len(data)]):
            parser.feed(data[a:b])
        parser.feed(b"", final=True)
    return str(err.value)


def test_bytes_that_are_not_utf8_name_the_byte_and_the_page_however_the_xml_is_read():
    xml = _sample_xml()
    title, page_id = _page_fields(xml, 5)
    previous = _page_fields(xml, 5)
    in_text = _corrupted("text")
    bad = in_text.index(b"\xe9")
    expected = _error(in_text, False, [])
    assert expected.startswith(f"dump.xml: not UTF-8 (byte 0xE9) in page {title!r} (id {page_id}), at line "), expected
    for fast in (True, False):  # the compiled reader hands such a page to expat: the same line, however cut
        for cuts in ([], [bad], [bad + 1], [bad - 3, bad + 1], list(range(1, len(in_text), 4096))):
            assert _error(in_text, fast, cuts) == expected, (fast, cuts)
    in_title = _corrupted("title")
    expected = _error(in_title, False, [])
    assert expected.startswith(f"dump.xml: not UTF-8 (byte 0xE9) in the title of the page after {previous[0]!r} "
                               f"(id {previous[1]}), at line "), expected
    bad = in_title.index(b"\xe9")
    for fast in (True, False):
        for cuts in ([], [bad], [bad + 1], list(range(1, len(in_title), 1000))):
            assert _error(in_title, fast, cuts) == expected, (fast, cuts)


def test_a_latin1_dump_and_a_declared_encoding():
    xml = _sample_xml().decode()
    latin1 = xml.encode("latin-1", "replace")
    first = min(i for i, b in enumerate(latin1) if b >= 0x80)
    line = _error(latin1, True, [])
    assert line.startswith(f"dump.xml: not UTF-8 (byte 0x{latin1[first]:02X}) in page "), line
    # Declared as Latin-1, the same bytes are read.
    from bertdata.text.wikidump import DumpParser

    parser = DumpParser("dump.xml")
    parser.feed(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n' + latin1, final=True)
    assert len(parser.drain()) > 10


def test_a_build_of_a_dump_with_a_latin1_byte_is_one_line_naming_the_page(tmp_path):
    dump = tmp_path / "bad-pages-articles.xml"
    dump.write_bytes(_corrupted("text"))
    title, page_id = _page_fields(_sample_xml(), 5)
    proc = run_cli("build", "--wiki-only", "--dump", dump, "--vocab", SAMPLE_VOCAB, "--output", tmp_path / "out",
                   "--workers", "1", "--phase", "1", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bertdata build: error: {dump}: not UTF-8 (byte 0xE9) in page {title!r} (id {page_id}), "
                           "at line "), last
    assert not leftovers(tmp_path / "out")


# --- 9. no thread's traceback on the terminal; the lock written whole -----------------------------

def test_a_threads_traceback_goes_to_the_build_log_never_to_the_terminal(tmp_path, capfd):
    """Beam's "Exception in thread run_worker ... RuntimeError", as a killed worker's channel
    breaks, came after the build's stderr was the terminal again."""
    from bertdata.pipelines.runtime.log import beam_output_to

    log = tmp_path / "build.log"
    saved = threading.excepthook
    try:
        with beam_output_to(str(log)):
            pass

        def fail() -> None:
            raise RuntimeError("server must be started and not shutting down")

        thread = threading.Thread(target=fail, name="run_worker")
        thread.start()
        thread.join()
    finally:
        threading.excepthook = saved
    assert capfd.readouterr().err == ""
    assert "Exception in thread run_worker:\nTraceback" in log.read_text()
    assert "RuntimeError: server must be started and not shutting down" in log.read_text()


@pytest.mark.slow
@LINUX_PROC
def test_a_worker_killed_mid_build_is_one_line_and_no_traceback(tmp_path, short_tmpdir):
    out = tmp_path / "out"
    proc = _build(out, "--workers", "2", tmpdir=short_tmpdir)
    try:
        deadline = time.time() + 120
        while not list(out.glob(".bertdata-work/runs/*.run")):
            assert proc.poll() is None and time.time() < deadline, "the build ended before its text stage"
            time.sleep(0.005)
        server = next(c for c in child_pids(proc.pid) if "--serve" in cmdline(c))
        victim = child_pids(server)[0]
        os.kill(victim, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    assert stderr.splitlines()[-1].startswith(f"bertdata build: error: worker process {victim} was killed by SIGKILL")
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr
    assert not leftovers(out) and not list(short_tmpdir.iterdir())


def test_the_lock_is_never_seen_without_its_owner(tmp_path):
    """It was created empty and its record written after: a build that found it in between called
    the live holder "unknown" and told the user to remove it."""
    from bertdata.fsutil import LOCK_NAME

    lock_folder, stop = tmp_path / "lock", tmp_path / "stop"
    lock_folder.mkdir()
    script = ("import os, sys; from bertdata.fsutil import folder_lock\n"
              "while not os.path.exists(sys.argv[2]):\n"
              "    with folder_lock(sys.argv[1], 'test'):\n"
              "        pass\n")
    holder = subprocess.Popen([sys.executable, "-c", script, str(lock_folder), str(stop)])
    lock, reads, deadline = lock_folder / LOCK_NAME, 0, time.time() + 30
    try:
        while reads < 300 and time.time() < deadline:  # the lock is there for microseconds at a time
            try:
                text = lock.read_text()
            except FileNotFoundError:
                continue
            reads += 1
            assert json.loads(text)["pid"] == holder.pid, repr(text)
    finally:
        stop.touch()
        assert holder.wait() == 0
    assert reads == 300
    assert list(lock_folder.iterdir()) == [], "the lock's record was left behind"


@pytest.mark.slow
def test_of_two_builds_started_together_the_refused_one_names_the_holder(tmp_path, short_tmpdir):
    out = tmp_path / "out"
    procs = [_build(out, "--workers", "1", "--phase", "1", tmpdir=short_tmpdir) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    refused = [err for code, err in results if code != 0]
    assert len(refused) <= 1, results
    for err in refused:  # none when one finished before the other took the lock
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"bertdata build: error: {out}: another bertdata build is writing here (pid "), line
        assert "unknown" not in line
