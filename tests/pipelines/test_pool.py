"""The local worker pool (bertdata.pipelines.runtime.pool): its server, the attach command, cleanup.

Builds through the pool (every `--workers 2` CLI build in the suite) check the bytes; these
check what a build does not show: statuses, streams, and what is left when things end."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import psutil
import pytest

from bertdata.config import RunnerConfig
from bertdata.pipelines.runtime.pool import WorkerPool, worker_pool

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the pool forks its workers on Linux only")


def attach(pool: WorkerPool, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(shlex.split(pool.command), capture_output=True, text=True, timeout=60, **kwargs)


def test_a_worker_that_fails_reports_its_traceback_on_its_own_stderr_and_exits_1(tmp_path):
    with worker_pool(RunnerConfig("local", 2)) as pool:
        # No runner address in the environment: the forked harness fails at once.
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_SERVICE_DESCRIPTOR")}
        proc = attach(pool, env=env, cwd=tmp_path)
        # Forking is safe while the server's only threads besides its main one are native
        # helpers with fork handlers (OpenBLAS's, jemalloc's): no Python thread of its own.
        assert psutil.Process(pool.server.pid).num_threads() <= 3
    assert proc.returncode == 1
    # The forked worker's traceback, through the stderr this command handed over.
    assert "in _worker" in proc.stderr and "CONTROL_API_SERVICE_DESCRIPTOR" in proc.stderr


def test_the_server_ends_and_removes_its_socket_when_the_pool_closes():
    pool = WorkerPool()
    folder = pool.folder
    assert os.path.exists(os.path.join(folder, "workers.sock"))
    pool.close()
    assert pool.server.returncode == 0
    assert not os.path.exists(folder)


def test_the_server_ends_and_cleans_up_when_its_launcher_is_killed_outright():
    script = ("import time; from bertdata.pipelines.runtime.pool import WorkerPool; p = WorkerPool(); "
              "print(p.server.pid, p.folder, flush=True); time.sleep(120)")
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid, folder = launcher.stdout.readline().split()
    server = psutil.Process(int(pid))
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait()
    # It may still be importing; it notices its closed stdin once done.
    gone, alive = psutil.wait_procs([server], timeout=30)
    for p in alive:
        p.kill()
    assert not alive, "the pool's server outlived its launcher"
    deadline = time.time() + 5
    while os.path.exists(folder) and time.time() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(folder)


def test_without_a_server_the_attach_command_becomes_a_plain_worker(tmp_path):
    pool = WorkerPool()
    pool.server.kill()
    pool.server.wait()
    try:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_SERVICE_DESCRIPTOR")}
        proc = attach(pool, env=env)
    finally:
        pool.close()
    # The plain worker's harness fails the same way, in a process of its own.
    assert proc.returncode != 0 and "CONTROL_API_SERVICE_DESCRIPTOR" in proc.stderr
    assert "in _worker" not in proc.stderr
    assert not os.path.exists(pool.folder)


@pytest.mark.parametrize("cfg", [RunnerConfig("local", 1), RunnerConfig("in-memory", 2), RunnerConfig("dask", 2),
                                 RunnerConfig("DataflowRunner", 8)])
def test_no_pool_where_no_local_worker_processes_run(cfg):
    with worker_pool(cfg) as pool:
        assert pool is None


def test_a_temporary_folder_too_long_for_a_socket_puts_the_pool_in_tmp(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))  # a socket path longer than Unix allows
    with worker_pool(RunnerConfig("local", 2)) as pool:
        assert pool is not None and os.path.dirname(pool.folder) == "/tmp"
        folder = pool.folder
    assert not any(deep.iterdir()) and not os.path.exists(folder)


def test_a_later_pool_removes_the_folders_of_pools_whose_launcher_was_killed(tmp_path, monkeypatch):
    """SIGKILL to a build's whole group runs no cleanup: its socket folder stayed in $TMPDIR."""
    import json

    from bertdata.fsutil import this_process
    from bertdata.pipelines.runtime.pool import OWNER_NAME, socket_folder

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    # Where tmp_path is too long for a socket's path, the pool goes to SHORT_TMP: there too.
    monkeypatch.setattr("bertdata.pipelines.runtime.pool.SHORT_TMP", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import json; from bertdata.fsutil import this_process; "
                           "print(json.dumps(this_process()))"], capture_output=True, text=True, check=True)
    for name, owner in (("bertdata-workers-killed", json.loads(dead.stdout)),
                        ("bertdata-workers-alive", this_process()), ("bertdata-workers-unowned", None)):
        (tmp_path / name).mkdir()
        if owner is not None:
            (tmp_path / name / OWNER_NAME).write_text(json.dumps(owner))
    made = socket_folder()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["bertdata-workers-alive", "bertdata-workers-unowned", os.path.basename(made)])
    assert json.loads((tmp_path / os.path.basename(made) / OWNER_NAME).read_text())["pid"] == os.getpid()


def test_no_pool_where_its_socket_cannot_be_made(tmp_path, monkeypatch):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    monkeypatch.setattr("bertdata.pipelines.runtime.pool.SHORT_TMP", str(deep))  # too long as well
    with worker_pool(RunnerConfig("local", 2)) as pool:
        assert pool is None
    assert not any(deep.iterdir())


def test_the_pool_starts_before_beam_is_loaded():
    """The build command starts the server first so that its imports overlap the launcher's:
    importing the pool must not load Beam itself."""
    code = "import sys, bertdata.pipelines.runtime.pool, bertdata.commands.build; print('apache_beam' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_the_server_reports_a_worker_that_ends_abnormally(tmp_path):
    with worker_pool(RunnerConfig("local", 2)) as pool:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_SERVICE_DESCRIPTOR")}
        assert attach(pool, env=env, cwd=tmp_path).returncode == 1
        death = pool.first_death(timeout=30)
    assert death is not None and death.status == 1 and death.signal is None and not death.server
    assert death.describe() == f"worker process {death.pid} exited with status 1"


def test_a_reported_death_interrupts_the_main_thread_at_once():
    import threading

    from bertdata.pipelines.runtime.pool import WorkerDeath, WorkerDied

    pool = WorkerPool()
    try:
        death = WorkerDeath(4242, signal=signal.SIGKILL, task="the instance stage, text shard x_training_3")
        started = time.monotonic()
        with pytest.raises(WorkerDied) as caught, pool.stop_on_death():
            threading.Timer(0.2, pool._died, (death,)).start()
            threading.Event().wait(60)  # blocked, as the launcher is in Beam's wait for a bundle
        assert time.monotonic() - started < 10
        assert caught.value.death == death
        # Outside stop_on_death a death interrupts nothing.
        pool._died(death)
        time.sleep(0.2)
    finally:
        pool.close()
    assert death.describe() == ("worker process 4242 was killed by SIGKILL, likely out of memory (see dmesg; fewer "
                                "--workers use less) while on the instance stage, text shard x_training_3")


def test_a_killed_server_is_reported_and_a_closed_one_is_not():
    pool = WorkerPool()
    pool.server.kill()
    death = pool.first_death(timeout=30)
    pool.close()
    assert death is not None and death.server and death.signal == signal.SIGKILL
    pool = WorkerPool()
    pool.close()
    assert pool.first_death(timeout=1) is None


def test_a_workers_note_of_what_it_is_on_is_read_once(tmp_path):
    from bertdata.pipelines.runtime import pool as pool_module

    pool_module.task_file = str(tmp_path / f"{pool_module.TASK_PREFIX}77")
    try:
        pool_module.working_on("the text stage, writing x_training_0.txt")
        assert pool_module.read_task(str(tmp_path), 77) == "the text stage, writing x_training_0.txt"
        assert pool_module.read_task(str(tmp_path), 77) is None
        pool_module.working_on("the instance stage, text shard x_training_0")
        pool_module.working_on(None)  # the bundle finished
        assert pool_module.read_task(str(tmp_path), 77) is None
    finally:
        pool_module.task_file = None


def test_workers_started_inside_a_bertdata_checkout_run_the_installed_bertdata(tmp_path):
    """A worker started with `python -m` would import a `bertdata` folder in the current one."""
    decoy = tmp_path / "bertdata"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy checkout was imported')\n")
    bertdata = os.path.join(os.path.dirname(sys.executable), "bertdata")
    proc = subprocess.run([bertdata, "build", "--wiki-only", "--sample", "--output", tmp_path / "out", "--phase", "1",
                           "--training-shards", "2", "--test-shards", "1", "--workers", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "decoy" not in (tmp_path / "out" / "build.log").read_text()


def test_the_server_loads_every_module_a_builds_steps_need(tmp_path, monkeypatch):
    """A module the server has not loaded is imported by each forked worker as its first bundle
    starts, on the build's critical path (NLTK, under the sentence splitter the text steps carry,
    took ~0.2 s in each). Unpickling every step of a real build, all formats and both phases,
    after the server's imports must import nothing more."""
    import pickle

    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_runner_api_pb2

    from bertdata.cli import build_parser
    from bertdata.commands.build import config_from_args
    from bertdata.pipelines import build

    class Built(Exception):
        pass

    pipelines = []

    def capture(pipeline, *args, **kwargs):
        pipelines.append(pipeline)
        raise Built

    monkeypatch.setattr(build, "run_pipeline", capture)
    args = build_parser().parse_args(["build", "--wiki-only", "--sample", "--phase", "both", "--workers", "2",
                                      "--format", "hdf5", "lddl", "megatron", "--output", str(tmp_path / "out")])
    with pytest.raises(Built):
        build.run_build(config_from_args(args))
    transforms = pipelines[0].to_runner_api().components.transforms.values()
    steps = [beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload).do_fn.payload for t in transforms
             if t.spec.urn == common_urns.primitives.PAR_DO.urn]
    assert len(steps) > 10
    (tmp_path / "steps.pickle").write_bytes(pickle.dumps(steps))
    code = ("import pickle, sys\n"
            "from bertdata.pipelines.runtime import worker\n"
            "from apache_beam.internal import pickler\n"
            "worker.preload()\n"
            "before = set(sys.modules)\n"
            "for step in pickle.loads(open(sys.argv[1], 'rb').read()):\n"
            "    pickler.loads(step)\n"
            "print(' '.join(sorted(set(sys.modules) - before)))\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "steps.pickle")], capture_output=True,
                          text=True, timeout=120, check=True)
    # The punkt model's data is the build's language's, which the server cannot know.
    assert [m for m in done.stdout.split() if not m.startswith("punkt.data.")] == [], done.stdout


@pytest.mark.parametrize("cfg", [RunnerConfig("in-memory"), RunnerConfig("local", 2)], ids=["in-process", "forked"])
def test_bundles_run_with_the_prompt_state_sampler(cfg, tmp_path):
    """Beam's sampler sleeps up to 200 ms, and each bundle's end waits for it: every stage of a
    build ended up to 0.2 s after its last element. Bundles in the launcher's process and in
    the pool's workers run with the prompt one (bertdata.pipelines.runtime.sampling)."""
    import apache_beam as beam
    from apache_beam.runners.worker import statesampler

    from bertdata.pipelines.runtime.runners import make_pipeline
    from bertdata.pipelines.runtime.sampling import SAMPLING_MS

    def note_period(element: int, folder: str) -> None:
        with open(os.path.join(folder, f"{os.getpid()}-{element}"), "w") as f:
            f.write(str(statesampler.get_current_tracker().sampling_period_ms))

    with worker_pool(cfg) as pool:
        pipeline = make_pipeline(cfg, pool)
        _ = pipeline | beam.Create(range(8)) | beam.Reshuffle() | beam.Map(note_period, str(tmp_path))
        pipeline.run().wait_until_finish()
    notes = list(tmp_path.iterdir())
    assert len(notes) == 8 and {n.read_text() for n in notes} == {str(SAMPLING_MS)}
    # Each worker's bundle ran in its own process: the forked ones are checked too.
    pids = {n.name.split("-")[0] for n in notes}
    assert (str(os.getpid()) in pids) == (cfg.runner == "in-memory")


def test_the_launcher_plans_a_build_without_nltk_and_the_server_has_it_loaded(tmp_path):
    """NLTK is slow to import: the launcher only names the splitter (its planning is the
    build's critical path while the pool's server imports on the other core), and the server
    loads what the splitter loads when it first splits, once for every forked worker."""
    launcher = ("import sys\n"
                "from bertdata.cli import build_parser\n"
                "from bertdata.commands.build import config_from_args\n"
                "from bertdata.pipelines import build\n"
                "class Planned(Exception): pass\n"
                "def planned(*args, **kwargs): raise Planned\n"
                "build.run_pipeline = planned\n"
                "args = build_parser().parse_args(['build', '--wiki-only', '--sample', '--workers', '2', "
                "'--output', sys.argv[1]])\n"
                "try:\n"
                "    build.run_build(config_from_args(args))\n"
                "except Planned:\n"
                "    print(sorted(m for m in sys.modules if m.split('.')[0] == 'nltk'))\n")
    done = subprocess.run([sys.executable, "-c", launcher, str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120, check=True, cwd=tmp_path)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    server = ("import sys\n"
              "from bertdata.pipelines.runtime import worker\n"
              "worker.preload()\n"
              "before = set(sys.modules)\n"
              "from bertdata.text.sentences import SentenceSplitter\n"
              "for kind in ('fast', 'nltk'):\n"
              "    assert len(SentenceSplitter('english', kind=kind).split_article('Mr. Smith left. He ran.')) == 2\n"
              "print(' '.join(sorted(set(sys.modules) - before)))\n")
    done = subprocess.run([sys.executable, "-c", server], capture_output=True, text=True, timeout=120, check=True)
    assert [m for m in done.stdout.split() if not m.startswith("punkt.data.")] == [], done.stdout
