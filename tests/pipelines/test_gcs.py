"""A build from gs:// to gs://, and its resume after a kill, against a GCS emulator on 127.0.0.1
(gcp-storage-emulator, over HTTP). Beam's gcp extra slows every Beam import, so these run in
a virtualenv of their own (`make test` runs them in .venv-gcs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("google.cloud.storage", reason="needs Beam's gcp extra: `make test` runs this in .venv-gcs")
pytest.importorskip("gcp_storage_emulator", reason="needs gcp-storage-emulator: `make test` runs this in .venv-gcs")

from conftest import STORE_BUILD, VOCAB, WIKI_FRAGMENT, need, run_cli  # noqa: E402
from servers import digest, free_port  # noqa: E402

pytestmark = pytest.mark.slow
BUCKET = "wiki"


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    port = free_port()
    log = open(tmp_path_factory.mktemp("gcs") / "emulator.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                             "--port", str(port), "--in-memory"], stdout=log, stderr=log)
    env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}"}
    os.environ.update(env)  # for this process's client
    client = storage.Client(project="test", credentials=AnonymousCredentials())
    deadline = time.time() + 60
    while True:
        try:
            client.create_bucket(BUCKET)
            break
        except Exception:
            assert proc.poll() is None and time.time() < deadline, "GCS emulator did not start"
            time.sleep(0.2)
    yield env, client
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def names(client, prefix: str) -> list[str]:
    return [b.name for b in client.list_blobs(BUCKET, prefix=prefix + "/")]


def stored_digest(client, prefix: str) -> dict[str, str]:
    return digest((blob.name[len(prefix) + 1:], blob.download_as_bytes())
                  for blob in client.list_blobs(BUCKET, prefix=prefix + "/"))


@pytest.fixture(scope="module")
def dump(gcs):
    _, client = gcs
    need(WIKI_FRAGMENT)
    client.bucket(BUCKET).blob(f"dumps/{WIKI_FRAGMENT.name}").upload_from_filename(str(WIKI_FRAGMENT))
    return f"gs://{BUCKET}/dumps/{WIKI_FRAGMENT.name}"


def command(dump: str, prefix: str) -> list[str]:
    return ["build", "--wiki-only", "--dump", dump, "--vocab", str(VOCAB), "--output", f"gs://{BUCKET}/{prefix}",
            *STORE_BUILD, "--workers", "2"]


def test_a_build_on_gcs_gives_the_local_bytes(gcs, dump, local_build, tmp_path):
    env, client = gcs
    run_cli(*command(dump, "whole"), env={**os.environ, **env}, cwd=tmp_path)
    assert stored_digest(client, "whole") == local_build


def test_a_killed_build_on_gcs_resumes_and_leaves_nothing_behind(gcs, dump, local_build, tmp_path):
    env, client = gcs
    proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", *command(dump, "killed")], cwd=tmp_path,
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while not any(n.endswith(".txt") for n in names(client, "killed")):
        assert proc.poll() is None and time.time() < deadline, "the build ended before a text shard appeared"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not any(n.endswith("manifest.json") for n in names(client, "killed"))
    run_cli(*command(dump, "killed"), env={**os.environ, **env}, cwd=tmp_path)
    assert stored_digest(client, "killed") == local_build
