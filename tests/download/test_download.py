"""`bertdata.download.fetch` and `.dumps` against a real HTTP server on 127.0.0.1 that can misbehave on purpose."""

from __future__ import annotations

import hashlib
import socket
import time

import pytest
from conftest import signals_default, run_cli
from mirror import PAYLOAD, STALL_S, fake_run, serve, server, sha1  # noqa: F401  (server: a fixture)

from bertdata.download import fetch as download
from bertdata.download.dumps import DumpSpec, download_dump, dump_files, parse_sums
from bertdata.download.fetch import fetch, fetch_text
from bertdata.errors import BertdataError


def no_leftovers(dest) -> bool:
    return not dest.exists() and not dest.with_name(dest.name + ".part").exists()


# ------------------------------------------------------------------------ fetch


def test_download_verifies_every_digest_and_renames(server, tmp_path):
    url = serve(server, "/f.bin")
    dest = tmp_path / "sub" / "f.bin"
    out = fetch(
        url, dest, sha256=hashlib.sha256(PAYLOAD).hexdigest(), sha1=sha1(PAYLOAD).upper(),
        md5=hashlib.md5(PAYLOAD).hexdigest(), progress=True,
    )
    assert out == dest
    assert dest.read_bytes() == PAYLOAD
    assert not dest.with_name("f.bin.part").exists()
    assert server.mirror.requests("/f.bin") == [(None, 200)]


def test_connection_cut_half_way_resumes_with_range(server, tmp_path):
    url = serve(server, "/cut.bin")
    server.mirror.cut_once.add("/cut.bin")
    dest = tmp_path / "cut.bin"
    fetch(url, dest, sha1=sha1(PAYLOAD), backoff=0.01, progress=False)
    assert dest.read_bytes() == PAYLOAD
    half = len(PAYLOAD) // 2
    assert server.mirror.requests("/cut.bin") == [(None, 200), (f"bytes={half}-", 206)]


def test_part_left_by_an_earlier_run_is_continued(server, tmp_path):
    url = serve(server, "/p.bin")
    dest = tmp_path / "p.bin"
    (tmp_path / "p.bin.part").write_bytes(PAYLOAD[:1000])
    fetch(url, dest, sha1=sha1(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.mirror.requests("/p.bin") == [("bytes=1000-", 206)]


def test_server_ignoring_range_restarts_from_zero(server, tmp_path):
    url = serve(server, "/norange.bin")
    server.mirror.ignore_range.add("/norange.bin")
    dest = tmp_path / "norange.bin"
    # Not a prefix of the file: appending the full answer to it would corrupt the result.
    (tmp_path / "norange.bin.part").write_bytes(b"\xff" * 5000)
    fetch(url, dest, sha1=sha1(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.mirror.requests("/norange.bin") == [("bytes=5000-", 200)]


def test_complete_part_answered_416_is_verified_and_renamed(server, tmp_path):
    url = serve(server, "/done.bin")
    dest = tmp_path / "done.bin"
    (tmp_path / "done.bin.part").write_bytes(PAYLOAD)
    fetch(url, dest, sha1=sha1(PAYLOAD), progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.mirror.requests("/done.bin") == [(f"bytes={len(PAYLOAD)}-", 416)]


def test_checksum_mismatch_deletes_the_download_and_names_both_digests(server, tmp_path):
    url = serve(server, "/bad.bin")
    dest = tmp_path / "bad.bin"
    wrong = "0" * 40
    with pytest.raises(BertdataError) as err:
        fetch(url, dest, sha1=wrong, progress=False)
    message = str(err.value)
    assert url in message and wrong in message and sha1(PAYLOAD) in message
    assert no_leftovers(dest)


def test_404_fails_at_once_without_retries(server, tmp_path):
    url = server.base + "/missing.bin"
    dest = tmp_path / "missing.bin"
    started = time.monotonic()
    with pytest.raises(BertdataError, match="404") as err:
        fetch(url, dest, retries=5, backoff=10.0, progress=False)
    assert time.monotonic() - started < 2.0
    assert url in str(err.value)
    assert server.mirror.requests("/missing.bin") == [(None, 404)]
    assert no_leftovers(dest)


def test_server_error_is_retried(server, tmp_path):
    url = serve(server, "/flaky.bin")
    server.mirror.fail_once["/flaky.bin"] = 503
    dest = tmp_path / "flaky.bin"
    fetch(url, dest, sha1=sha1(PAYLOAD), backoff=0.01, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.mirror.requests("/flaky.bin") == [(None, 503), (None, 200)]


def test_stalled_server_times_out_quickly_and_clearly(server, tmp_path):
    url = serve(server, "/stall.bin")
    server.mirror.stall.add("/stall.bin")
    dest = tmp_path / "stall.bin"
    started = time.monotonic()
    with pytest.raises(BertdataError, match=r"timed out after 0\.3s") as err:
        fetch(url, dest, sha1=sha1(PAYLOAD), timeout=0.3, retries=1, backoff=0.05, progress=False)
    assert time.monotonic() - started < STALL_S - 1
    assert url in str(err.value) and "2 attempt" in str(err.value)
    assert not dest.exists()
    # The second attempt asked for the bytes after the ones the first one kept.
    assert server.mirror.requests("/stall.bin") == [(None, 200), ("bytes=16-", 206)]


def test_unreachable_host_fails_fast(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/vocab.txt"
    started = time.monotonic()
    with pytest.raises(BertdataError, match="failed after 3 attempt") as err:
        fetch(url, tmp_path / "vocab.txt", sha256="a" * 64, retries=2, backoff=0.05, progress=False)
    assert time.monotonic() - started < 5.0
    assert url in str(err.value)


def test_unresolvable_host_fails_at_once_in_one_line(tmp_path, monkeypatch):
    """A name that does not resolve was once retried for 31 s."""
    def no_dns(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    url = "https://dumps.example.org/enwiki/latest/x.xml.bz2"
    for get in (lambda: fetch(url, tmp_path / "x.bin", retries=1, backoff=3.0, progress=False),
                lambda: fetch_text(url, retries=1, backoff=3.0)):
        started = time.monotonic()
        with pytest.raises(BertdataError) as err:
            get()
        assert time.monotonic() - started < 2.0
        assert str(err.value) == (f"{url}: cannot resolve the host name dumps.example.org "
                                  "(Name or service not known); check the URL and the network")
    assert no_leftovers(tmp_path / "x.bin")


def test_text_over_the_size_cap_is_refused_not_retried(server, tmp_path, monkeypatch):
    """A sums file over the cap was once reported, and retried, as a dropped connection."""
    monkeypatch.setattr(download, "MAX_TEXT_BYTES", 1000)
    url = serve(server, "/huge-sha1sums.txt", b"0" * 5000)
    with pytest.raises(BertdataError, match=r"huge-sha1sums.txt: larger than 1,000 bytes; not a small text file"):
        fetch_text(url, retries=1, backoff=0.5)
    assert server.mirror.requests("/huge-sha1sums.txt") == [(None, 200)]
    serve(server, "/just-sha1sums.txt", b"0" * 1000)
    assert fetch_text(server.base + "/just-sha1sums.txt") == "0" * 1000


def test_existing_verified_file_is_kept_without_a_request(server, tmp_path):
    url = serve(server, "/have.bin")
    dest = tmp_path / "have.bin"
    dest.write_bytes(PAYLOAD)
    assert fetch(url, dest, sha1=sha1(PAYLOAD), progress=False) == dest
    assert server.mirror.log == []


def test_existing_file_that_does_not_verify_is_not_overwritten_unless_forced(server, tmp_path):
    url = serve(server, "/mine.bin")
    dest = tmp_path / "mine.bin"
    dest.write_bytes(b"the user's own notes")
    with pytest.raises(BertdataError, match="exists but does not match") as err:
        fetch(url, dest, sha1=sha1(PAYLOAD), progress=False)
    assert str(dest) in str(err.value)
    assert dest.read_bytes() == b"the user's own notes"
    assert server.mirror.log == []

    fetch(url, dest, sha1=sha1(PAYLOAD), progress=False, force=True)
    assert dest.read_bytes() == PAYLOAD


def test_malformed_expected_digest_is_rejected_before_any_request(server, tmp_path):
    url = serve(server, "/x.bin")
    with pytest.raises(BertdataError, match="sha1 must be 40 hex digits"):
        fetch(url, tmp_path / "x.bin", sha1="abc", progress=False)
    assert server.mirror.log == []


# ------------------------------------------------------------- Wikimedia layout


def test_dump_files_follow_the_wikimedia_layout():
    urls = dump_files(DumpSpec("enwiki", "20240601", "https://dumps.wikimedia.org/"))
    base = "https://dumps.wikimedia.org/enwiki/20240601/enwiki-20240601-"
    assert urls.dump == base + "pages-articles-multistream.xml.bz2"
    assert urls.index == base + "pages-articles-multistream-index.txt.bz2"
    assert urls.sha1sums == base + "sha1sums.txt"
    latest = dump_files(DumpSpec())
    assert latest.dump == (
        "https://dumps.wikimedia.org/enwiki/latest/enwiki-latest-pages-articles-multistream.xml.bz2"
    )


@pytest.mark.parametrize("date", ["2024-06-01", "202406", "20240231", "newest", ""])
def test_dump_spec_rejects_bad_dates(date):
    with pytest.raises(BertdataError, match="--date must be 'latest' or .*YYYYMMDD"):
        DumpSpec(date=date)


def test_dump_spec_rejects_bad_wiki_and_mirror():
    with pytest.raises(BertdataError, match="--wiki"):
        DumpSpec(wiki="../etc")
    with pytest.raises(BertdataError, match="--mirror"):
        DumpSpec(mirror="dumps.wikimedia.org")


def test_parse_sums_reads_sha1sum_output_and_rejects_other_text():
    text = f"{'ab' * 20}  enwiki-x.xml.bz2\n{'CD' * 20} *enwiki-y.txt.bz2\n\n"
    assert parse_sums(text, "sums.txt") == {
        "enwiki-x.xml.bz2": "ab" * 20,
        "enwiki-y.txt.bz2": "cd" * 20,
    }
    with pytest.raises(BertdataError, match=r"sums\.txt: line 1 is not"):
        parse_sums("<html><body>Not Found</body></html>\n", "sums.txt")


def check_record(record, tmp_path, files, date):
    assert record["date"] == date
    for role, suffix in (("dump", "pages-articles-multistream.xml.bz2"),
                         ("index", "pages-articles-multistream-index.txt.bz2")):
        name = f"enwiki-{date}-{suffix}"
        item = record[role]
        assert item["path"] == str(tmp_path / name)
        assert (tmp_path / name).read_bytes() == files[name]
        assert item["sha1"] == sha1(files[name])
        assert item["bytes"] == len(files[name])
        assert item["url"].endswith(f"/enwiki/{date}/{name}")


def test_download_dump_for_a_dated_run(server, tmp_path):
    files = fake_run(server, "enwiki", "20240101")
    spec = DumpSpec("enwiki", "20240101", server.base)
    record = download_dump(spec, tmp_path, progress=False)
    check_record(record, tmp_path, files, "20240101")
    assert record["sha1sums_url"] == f"{server.base}/enwiki/20240101/enwiki-20240101-sha1sums.txt"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        n for n in files if "multistream" in n
    )
    # A second run finds both files verified and downloads nothing.
    before = len(server.mirror.log)
    assert download_dump(spec, tmp_path, progress=False) == record
    assert all(p.endswith("sha1sums.txt") for p, _, _ in server.mirror.log[before:])


def test_latest_is_resolved_through_the_feed_in_latest(server, tmp_path):
    files = fake_run(server, "enwiki", "20240101")
    fake_run(server, "enwiki", "20240201", finished=False)  # newer but still running
    feed = (
        '<?xml version="1.0"?>\n<rss version="2.0">\n<channel>\n'
        "<title>pages-articles-multistream.xml.bz2</title>\n"
        "<link>http://download.wikimedia.org/enwiki/20240101</link>\n"
        "<item><link>http://download.wikimedia.org/enwiki/20240101</link></item>\n"
        "</channel>\n</rss>\n"
    )
    serve(server, "/enwiki/latest/enwiki-latest-pages-articles-multistream.xml.bz2-rss.xml", feed.encode())
    record = download_dump(DumpSpec("enwiki", "latest", server.base), tmp_path, progress=False)
    check_record(record, tmp_path, files, "20240101")


def test_latest_falls_back_to_the_newest_finished_run_in_the_listing(server, tmp_path):
    files = fake_run(server, "enwiki", "20240101")
    fake_run(server, "enwiki", "20240201", finished=False)
    listing = (
        '<html><body><h1>Index of /enwiki/</h1><pre><a href="../">../</a>\n'
        '<a href="20231201/">20231201/</a>  02-Dec-2023 00:00  -\n'
        '<a href="20240101/">20240101/</a>  02-Jan-2024 00:00  -\n'
        '<a href="20240201/">20240201/</a>  02-Feb-2024 00:00  -\n'
        '<a href="latest/">latest/</a>      02-Feb-2024 00:00  -\n</pre></body></html>\n'
    )
    serve(server, "/enwiki/", listing.encode())
    record = download_dump(DumpSpec("enwiki", "latest", server.base), tmp_path, progress=False)
    check_record(record, tmp_path, files, "20240101")


def test_listing_folders_that_are_not_dates_are_ignored(server, tmp_path):
    """An 8-digit folder that is no date was once refused as the user's --date."""
    files = fake_run(server, "enwiki", "20240101")
    listing = ('<a href="20240101/">20240101/</a>\n<a href="20241399/">20241399/</a>\n'
               '<a href="99999999/">99999999/</a>\n')
    serve(server, "/enwiki/", listing.encode())
    record = download_dump(DumpSpec("enwiki", "latest", server.base), tmp_path, progress=False)
    check_record(record, tmp_path, files, "20240101")


def test_feed_naming_no_dated_run_is_blamed_on_the_feed(server, tmp_path):
    feed = server.base + "/enwiki/latest/enwiki-latest-pages-articles-multistream.xml.bz2-rss.xml"
    serve(server, feed.removeprefix(server.base), b"<rss><link>http://x/enwiki/20241399</link></rss>")
    with pytest.raises(BertdataError) as err:
        download_dump(DumpSpec("enwiki", "latest", server.base), tmp_path, progress=False)
    assert str(err.value) == f"{feed}: its <link> names run '20241399', not a date; pass --date YYYYMMDD"


def test_unfinished_run_is_refused_before_downloading_anything(server, tmp_path):
    fake_run(server, "enwiki", "20240201", finished=False)
    with pytest.raises(BertdataError, match="lists no sha1 for enwiki-20240201-pages-articles-multistream-index"):
        download_dump(DumpSpec("enwiki", "20240201", server.base), tmp_path, progress=False)
    assert [p for p, _, _ in server.mirror.log] == ["/enwiki/20240201/enwiki-20240201-sha1sums.txt"]
    assert list(tmp_path.iterdir()) == []


def test_dump_that_does_not_match_the_published_sha1_is_refused(server, tmp_path):
    files = fake_run(server, "enwiki", "20240101")
    name = "enwiki-20240101-pages-articles-multistream.xml.bz2"
    server.mirror.files[f"/enwiki/20240101/{name}"] = files[name][:-1] + b"\0"  # a corrupt mirror
    with pytest.raises(BertdataError, match=f"checksum mismatch for .*{name}.*sha1 expected {sha1(files[name])}"):
        download_dump(DumpSpec("enwiki", "20240101", server.base), tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_unknown_run_date_is_refused_clearly(server, tmp_path):
    with pytest.raises(BertdataError, match="no enwiki dump run dated 20200101"):
        download_dump(DumpSpec("enwiki", "20200101", server.base), tmp_path, progress=False)


# ---------------------------------------------------------------------- command


def test_download_command_end_to_end(server, tmp_path):
    files = fake_run(server, "enwiki", "20240101")
    out = tmp_path / "download"
    proc = run_cli("download", "--date", "20240101", "--mirror", server.base, "--output", out, timeout=60)
    for name in files:
        assert (out / name).exists() == ("multistream" in name)
    name = "enwiki-20240101-pages-articles-multistream.xml.bz2"
    assert (out / name).read_bytes() == files[name]
    assert "enwiki dump run 20240101" in proc.stdout and sha1(files[name]) in proc.stdout


def test_download_command_rejects_a_bad_date_before_any_request(server, tmp_path):
    proc = run_cli("download", "--date", "2024-01-01", "--mirror", server.base, "--output", tmp_path,
                   check=False, timeout=60)
    assert proc.returncode == 2
    assert "bertdata download: error: --date must be 'latest' or a dump run date YYYYMMDD" in proc.stderr
    assert server.mirror.log == []


def test_a_note_and_its_newline_are_one_write(monkeypatch):
    """A signal runs its handler between two writes, never inside one: a stop message printed
    after a note interrupted there would otherwise share the note's line."""
    import sys

    class Recorder:
        def __init__(self):
            self.writes = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            pass

    stderr = Recorder()
    monkeypatch.setattr(sys, "stderr", stderr)
    download.note("retry 1/5 in 1.0s")
    assert "retry 1/5 in 1.0s\n" in stderr.writes


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_download_command_stopped_by_a_signal_says_so_and_a_rerun_resumes(server, tmp_path, signame):
    import os
    import signal
    import subprocess
    import sys

    files = fake_run(server, "enwiki", "20240101")
    name = "enwiki-20240101-pages-articles-multistream.xml.bz2"
    path = f"/enwiki/20240101/{name}"
    server.mirror.stall.add(path)  # a few bytes, then silence: the signal lands mid-transfer
    out = tmp_path / "download"
    proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", "download", "--date", "20240101", "--mirror",
                             server.base, "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=signals_default)
    part = out / (name + ".part")
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size):
        assert proc.poll() is None and time.monotonic() < deadline, "the download never started"
        time.sleep(0.01)
    signum = getattr(signal, signame)
    os.kill(proc.pid, signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, stderr
    assert stderr.splitlines()[-1] == f"bertdata download: stopped by {signame}" and "Traceback" not in stderr
    assert part.stat().st_size == 16 and not (out / name).exists()  # kept for the next run
    server.mirror.stall.discard(path)
    run_cli("download", "--date", "20240101", "--mirror", server.base, "--output", out, timeout=60)
    assert (out / name).read_bytes() == files[name] and not part.exists()
    assert server.mirror.requests(path)[-1] == ("bytes=16-", 206)
