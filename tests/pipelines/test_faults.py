"""Faults a user or the system causes, end to end through the CLI: a worker that dies at any
moment (its very start too), stop signals, an output that is an input, paths the filesystem
refuses, inputs that are not what a command reads. Each ends in one line, and nothing is
left behind: no lock, work folder, worker pool folder or temporary file, and no folder made
by a build that was refused."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_SHARDS, SAMPLE_VOCAB, run_cli
from processes import child_pids, cmdline, leftovers


def _stops_default() -> None:
    """For `preexec_fn`: Ctrl-C and Ctrl-\\ as a terminal sends them (see conftest.signals_default)."""
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def _kill_the_first_forked_worker(proc: subprocess.Popen, signum: int) -> tuple[int, float]:
    """Send `signum` to the first worker the pool's server forks, as soon as it appears (the
    launcher has started the command that asks for it: the server's own subprocesses, made while
    it imports, come before)."""
    deadline = time.time() + 120
    server = None
    while True:
        assert proc.poll() is None and time.time() < deadline, "the build ended before its pool forked a worker"
        children = child_pids(proc.pid)
        if server is None:
            server = next((c for c in children if "--serve" in cmdline(c)), None)
        elif any("attach.py" in cmdline(p) for c in children for p in (c, *child_pids(c))):  # under Beam's sh -c
            # A forked worker runs the server's command line.
            victim = next((c for c in child_pids(server) if "--serve" in cmdline(c)), None)
            if victim is not None:
                os.kill(victim, signum)
                return victim, time.time()


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads the process tree from Linux's /proc")
@pytest.mark.parametrize("signame", ["SIGKILL", "SIGTERM"])
def test_a_worker_killed_at_its_very_start_ends_the_build_at_once(tmp_path, short_tmpdir, signame):
    """The first worker the pool forks is killed within a millisecond or so of its fork, before it
    has even connected to the runner: the build used to hang for good (the runner waited for a
    worker that connected after it had begun to close; see bertdata.pipelines.runtime.runners)."""
    out = tmp_path / "out"
    for _ in range(3):  # the victim may have been one of the server's own short-lived subprocesses
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", "build", "--wiki-only", "--sample", "--output",
                                 str(out), *SAMPLE_SHARDS, "--workers", "2"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(short_tmpdir)})
        try:
            victim, killed = _kill_the_first_forked_worker(proc, getattr(signal, signame))
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if proc.returncode != 0:
            break
    else:
        pytest.fail("no worker was killed")
    assert time.time() - killed < 20, "the build took more than 20 s to stop"
    assert proc.returncode == 1, stderr
    last = stderr.splitlines()[-1]
    assert last.startswith(f"bertdata build: error: worker process {victim} was killed by {signame}"), stderr
    assert "run it again to resume" in last and "Traceback" not in stderr
    assert not leftovers(out), leftovers(out)
    assert not list(short_tmpdir.iterdir())  # neither the pool's socket folder nor Beam's


def test_a_failed_runs_cleanup_removes_every_temporary_it_finds_and_says_so(tmp_path):
    """After a worker dies its files half-written in the stage folders go too (they stayed), and
    the line says what was removed."""
    from bertdata.fsutil import temp_basename
    from bertdata.pipelines.cleanup import clean_up_failed_run

    out = tmp_path / "out"
    work, text, phase = out / ".bertdata-work", out / "sharded" / "wikicorpus_en", out / "hdf5" / "wikicorpus_en"
    for folder in (work / "runs", text, phase):
        folder.mkdir(parents=True)
    (work / "runs" / "0.run").write_bytes(b"run")
    half = [text / temp_basename(), phase / temp_basename(), phase / temp_basename()]
    for path in half:
        path.write_bytes(b"half")
    (phase / "wikicorpus_en_training_0.hdf5").write_bytes(b"kept")
    said = clean_up_failed_run(None, str(out), str(work), [str(out), str(text), str(phase), str(out / "absent")])
    assert said == "its work folder, 3 half-written files and its lock removed"
    assert not work.exists() and not any(p.exists() for p in half)
    assert (phase / "wikicorpus_en_training_0.hdf5").read_bytes() == b"kept"
    assert clean_up_failed_run(None, str(out), str(work), [str(text)]) == "its lock removed"


def test_a_worker_that_connects_after_the_runner_began_to_close_is_told_to_stop():
    """Beam's runner, closing, tells only the workers connected by then to stop; one that connected
    later got a control stream that never ended, and the runner waited for it forever."""
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    from bertdata.pipelines.runtime.runners import tell_late_workers_to_stop

    tell_late_workers_to_stop()
    done = worker_handlers.BeamFnControlServicer._DONE_MARKER
    late = worker_handlers.ControlConnection()
    late.close()  # the runner closes before the worker has connected
    late.set_input(iter(()))  # the worker connects
    assert late.get_req() is done
    early = worker_handlers.ControlConnection()
    early.set_input(iter(()))
    early.close()  # as before: a connected worker is told when the runner closes
    assert early.get_req() is done


@pytest.mark.slow
@pytest.mark.parametrize("target", ["group", "launcher"])
def test_ctrl_backslash_stops_a_build_as_sigterm_does(tmp_path, short_tmpdir, target):
    """SIGQUIT (Ctrl-\\ reaches the terminal's whole process group) used to end the launcher at
    once, leaving its lock and work folder."""
    out = tmp_path / "out"
    for delay in (0.05, 0):
        shutil.rmtree(out, ignore_errors=True)
        proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", "build", "--wiki-only", "--sample", "--output",
                                 str(out), *SAMPLE_SHARDS, "--workers", "2"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(short_tmpdir)},
                                start_new_session=True, preexec_fn=_stops_default)
        deadline = time.time() + 120
        while not list(out.glob(".bertdata-work/runs/*.run")):
            assert proc.poll() is None and time.time() < deadline, "the build ended before its text stage"
            time.sleep(0.005)
        time.sleep(delay)
        (os.killpg if target == "group" else os.kill)(proc.pid, signal.SIGQUIT)
        stopped = time.time()
        _, stderr = proc.communicate(timeout=60)
        if proc.returncode != 0:
            break
    else:
        pytest.fail("the build finished before SIGQUIT landed")
    assert time.time() - stopped < 20
    assert proc.returncode == 128 + signal.SIGQUIT, stderr
    assert stderr.rstrip().splitlines()[-1] == "bertdata build: stopped by SIGQUIT" and "Traceback" not in stderr
    assert not leftovers(out), leftovers(out)
    assert not list(short_tmpdir.iterdir())
    assert not list(out.rglob("core*"))


@pytest.mark.parametrize("command", ["instances", "vocab"])
def test_no_command_overwrites_its_own_input_even_with_force(tmp_path, command):
    from conftest import SHARD_A

    text = tmp_path / "one.txt"
    shutil.copyfile(SHARD_A, text)
    before = text.read_bytes()
    os.link(text, tmp_path / "hard.txt")
    for output in (text, tmp_path / "hard.txt", tmp_path / "." / "one.txt"):
        proc = run_cli(command, text, "--output", output, "--force", check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == (f"bertdata {command}: error: {os.path.normpath(output)}: is also an input of this "
                                       f"command ({text}); writing it would destroy what it reads: choose another "
                                       "output"), proc.stderr
        assert text.read_bytes() == before
    if command == "instances":  # the vocab is an input too
        vocab = tmp_path / "vocab.txt"
        shutil.copyfile(SAMPLE_VOCAB, vocab)
        proc = run_cli("instances", text, "--vocab", vocab, "--output", vocab, "--force", check=False)
        assert proc.returncode == 2 and "is also an input" in proc.stderr
        assert vocab.read_bytes() == SAMPLE_VOCAB.read_bytes()


def test_a_vocab_beginning_with_a_byte_order_mark_is_named_as_such(tmp_path):
    """BERT's tokenizers (Google's, Hugging Face's) read the mark as part of the first token: the
    vocab is refused, for what it is (it was called "missing [PAD]")."""
    from bertdata.errors import BertdataError
    from bertdata.instances.vocab import load_vocab

    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"\xef\xbb\xbf" + SAMPLE_VOCAB.read_bytes())
    with pytest.raises(BertdataError) as err:
        load_vocab(vocab)
    assert str(err.value) == (f"{vocab}: begins with a UTF-8 byte-order mark (bytes EF BB BF), which BERT's "
                              "tokenizers read as part of its first token ('[PAD]'); save it as UTF-8 without a BOM")


def test_a_parquet_file_given_to_inspect_is_named_as_such(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"A": ["a b"], "B": ["c d"]})
    alone = tmp_path / "rows.parquet"
    pq.write_table(table, alone)
    proc = run_cli("inspect", alone, check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"bertdata inspect: error: {alone}: a parquet file outside the folder of any format; LDDL's and Hugging "
        "Face's parquet are checked by their folders (an LDDL phase with its .num_samples.json, a dataset with its "
        "README.md): bertdata inspect FOLDER"), proc.stderr
    folder = tmp_path / "parquet"
    folder.mkdir()
    pq.write_table(table, folder / "shard-0.parquet")
    proc = run_cli("inspect", folder / "shard-0.parquet", check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"bertdata inspect: error: {folder / 'shard-0.parquet'}: one file of the lddl folder {folder}, which is "
        f"checked as a whole: bertdata inspect {folder}"), proc.stderr
    assert "hdf5" not in proc.stdout


def _refused(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    before = sorted(tmp_path.rglob("*"))
    proc = run_cli("build", "--wiki-only", *args, "--workers", "1", check=False, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(tmp_path.rglob("*")) == before, "a refused build wrote something"
    return proc


def test_a_refused_build_leaves_no_folder(tmp_path):
    (tmp_path / "a.txt").write_text("hi\n")
    assert "missing.xml.bz2: dump file not found" in _refused(tmp_path, "--dump", "missing.xml.bz2",
                                                               "--output", "o1").stderr
    assert "a.txt: neither XML nor bz2" in _refused(tmp_path, "--dump", "a.txt", "--output", "o2/deeper").stderr
    vocab = tmp_path / "bom.txt"
    vocab.write_bytes(b"\xef\xbb\xbf" + SAMPLE_VOCAB.read_bytes())
    assert "byte-order mark" in _refused(tmp_path, "--sample", "--vocab", "bom.txt", "--output", "o3").stderr


def test_an_output_path_the_filesystem_refuses_is_one_line(tmp_path):
    # 20 nested folders of 200 characters: each name is allowed, the whole too, but not the files under it.
    long = os.path.join(*["x" * 200] * 20)
    line = _refused(tmp_path, "--sample", "--output", long).stderr
    assert "cannot create the output folder (its path is" in line and "choose a shorter --output" in line
    assert "cannot create the output folder (File name too long)" in _refused(
        tmp_path, "--sample", "--output", "y" * 300).stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_output_under_proc_cannot_be_created(tmp_path):
    """It was refused for "not enough free disk" (/proc has no blocks)."""
    line = _refused(tmp_path, "--sample", "--output", "/proc/bertdata-out").stderr
    assert line.strip() == "bertdata build: error: /proc/bertdata-out: cannot create the output folder (No such file " \
                           "or directory)", line
