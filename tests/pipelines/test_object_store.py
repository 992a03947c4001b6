"""Builds whose dump, vocab and output live on an S3 store (moto's server on 127.0.0.1, over
HTTP): the bytes of a local build, on the local runner and on a Dask cluster whose workers
share no disk; resume after a kill; the output lock; and one line for each bad input."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import STORE_BUILD, VOCAB, WIKI_FRAGMENT, need, run_cli
from mirror import server  # noqa: F401  (the mirror on 127.0.0.1, a fixture)
from servers import BUCKET, S3Server, clear, dask_cluster, free_port, keys, put_file, stop_all, store_digest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    store = S3Server(tmp_path_factory.mktemp("moto") / "moto.log")
    client = store.client()
    client.create_bucket(Bucket=BUCKET)
    yield store, client
    store.stop()


@pytest.fixture(scope="module")
def inputs(s3):
    """The fragment dump and the vocab on the store, and a local build of them to compare with."""
    _, client = s3
    need(WIKI_FRAGMENT)
    dump = put_file(client, WIKI_FRAGMENT, f"dumps/{WIKI_FRAGMENT.name}")
    vocab = put_file(client, VOCAB, "vocab/vocab.txt")
    return dump, vocab


def build_on_store(store: S3Server, dump: str, vocab: str, output: str, *extra: str, check: bool = True,
                   env: dict | None = None, cwd=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # only the store's settings
    return run_cli("build", "--wiki-only", "--dump", dump, "--vocab", vocab, "--output", output, *STORE_BUILD, *extra,
                   check=check, env={**clean, **(store.env if env is None else env)}, cwd=cwd)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_build_from_the_store_to_the_store_gives_the_local_bytes(s3, inputs, local_build, tmp_path, workers):
    store, client = s3
    dump, vocab = inputs
    prefix = f"local-{workers}"
    build_on_store(store, dump, vocab, f"s3://{BUCKET}/{prefix}", "--workers", workers, cwd=tmp_path)
    assert store_digest(client, prefix) == local_build  # no temporaries, work folder or lock left either
    # Beam's log goes to the output, as on local disk, not to the folder the build ran in.
    assert f"{prefix}/build.log" in keys(client, prefix) and not (tmp_path / "build.log").exists()


def test_store_options_after_the_double_dash_work_without_any_environment(s3, inputs, local_build, tmp_path):
    """The issue's command: endpoint and credentials as Beam options, none in the environment."""
    store, client = s3
    dump, vocab = inputs
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    run_cli("build", "--wiki-only", "--dump", dump, "--vocab", vocab, "--output", f"s3://{BUCKET}/options",
            *STORE_BUILD, "--workers", "2", "--", f"--s3_endpoint_url={store.endpoint}", "--s3_access_key_id=testing",
            "--s3_secret_access_key=testing", "--s3_region_name=us-east-1", env=env, cwd=tmp_path)
    assert store_digest(client, "options") == local_build


@pytest.fixture
def dask_cluster_without_shared_disk(tmp_path):
    """None of the processes has the store's settings in its environment: what the workers know
    comes with the pipeline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with open(tmp_path / "dask.log", "w") as log:
        scheduler_file, procs = dask_cluster(tmp_path, env, log)
        try:
            yield scheduler_file, [tmp_path / "worker0", tmp_path / "worker1"]
        finally:
            stop_all(procs)


def test_a_dask_cluster_that_shares_no_disk_gives_the_local_bytes(s3, inputs, local_build,
                                                                   dask_cluster_without_shared_disk, tmp_path):
    store, client = s3
    dump, vocab = inputs
    scheduler_file, worker_folders = dask_cluster_without_shared_disk
    launcher = tmp_path / "launcher"
    launcher.mkdir()
    build_on_store(store, dump, vocab, f"s3://{BUCKET}/dask", "--runner", "dask", "--",
                   f"--dask_scheduler_file={scheduler_file}", cwd=launcher)
    assert store_digest(client, "dask") == local_build
    for folder in worker_folders:  # nothing of the build went through a worker's own disk
        assert not [p for p in (folder / "tmp").rglob("*") if p.is_file()]


def test_a_killed_build_resumes_on_the_store_and_leaves_nothing_behind(s3, inputs, local_build, tmp_path):
    store, client = s3
    dump, vocab = inputs
    output = f"s3://{BUCKET}/killed"
    proc = subprocess.Popen([sys.executable, "-m", "bertdata.cli", "build", "--wiki-only", "--dump", dump, "--vocab",
                             vocab, "--output", output, *STORE_BUILD, "--workers", "2"], cwd=tmp_path,
                            env={**os.environ, **store.env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while not any(k.endswith(".txt") for k in keys(client, "killed")):  # the text stage is writing
        assert proc.poll() is None and time.time() < deadline, "the build ended before a text shard appeared"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = keys(client, "killed")
    assert "killed/.bertdata-lock" in left and not any(k.endswith("manifest.json") for k in left)
    for key in left:  # a trainer picks files by "train" and by suffix: no temporary looks like one
        name = key.rsplit("/", 1)[1]
        if name.startswith(".bertdata-tmp-"):
            assert "train" not in name and not name.endswith((".hdf5", ".parquet"))
    proc = build_on_store(store, dump, vocab, output, "--workers", "2", cwd=tmp_path)
    assert "took over the lock" in proc.stderr
    assert store_digest(client, "killed") == local_build


def test_a_second_build_into_the_same_prefix_is_refused(s3, inputs, tmp_path):
    store, client = s3
    dump, vocab = inputs
    import socket

    owner = {"pid": os.getpid(), "host": socket.gethostname(), "start": None, "since": "now"}
    client.put_object(Bucket=BUCKET, Key="locked/.bertdata-lock", Body=json.dumps(owner).encode())
    proc = build_on_store(store, dump, vocab, f"s3://{BUCKET}/locked", check=False, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"bertdata build: error: s3://{BUCKET}/locked: another bertdata build is "
                                                f"writing here (pid {os.getpid()} on {socket.gethostname()}, since "
                                                "now); wait for it or choose another output folder"]
    assert keys(client, "locked") == ["locked/.bertdata-lock"]


def _one_line(proc, *words: str) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def test_bad_store_inputs_get_one_line_quickly(s3, inputs, tmp_path):
    store, client = s3
    dump, vocab = inputs

    def refused(output: str, *words: str, dump: str = dump, env: dict | None = None):
        started = time.time()
        proc = build_on_store(store, dump, vocab, output, check=False, env=env, cwd=tmp_path)
        line = _one_line(proc, *words)
        assert time.time() - started < 30, line
        return line

    refused("s3://no-such-bucket/out", "s3://no-such-bucket", "does not exist")
    refused(f"s3://{BUCKET}/missing-dump", f"s3://{BUCKET}/dumps/nope.xml.bz2", "not found",
            dump=f"s3://{BUCKET}/dumps/nope.xml.bz2")
    refused(f"s3://{BUCKET}/unreachable", "cannot reach the S3 endpoint",
            env={**store.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"})
    no_credentials = {k: v for k, v in store.env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    refused(f"s3://{BUCKET}/anonymous", "no S3 credentials",
            env={**no_credentials, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                 "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"})
    # Without boto3 (the s3 extra): a folder on the path whose boto3 cannot be imported.
    stub = tmp_path / "no-boto3"
    (stub / "boto3").mkdir(parents=True)
    (stub / "boto3" / "__init__.py").write_text("raise ImportError('No module named boto3')\n")
    refused(f"s3://{BUCKET}/no-extra", "pip install 'bertdata[s3]'", env={**store.env, "PYTHONPATH": str(stub)})
    for prefix in ("missing-dump", "unreachable", "anonymous", "no-extra"):
        assert keys(client, prefix) == []


def test_wrong_credentials_get_one_line(tmp_path, inputs):
    """moto checks credentials once told to: a second server that does."""
    store = S3Server(tmp_path / "moto.log", INITIAL_NO_AUTH_ACTION_COUNT="0")
    try:
        env = {**store.env, "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG1"}
        proc = build_on_store(store, f"s3://{BUCKET}/dumps/{WIKI_FRAGMENT.name}", str(VOCAB), f"s3://{BUCKET}/out",
                              check=False, env=env, cwd=tmp_path)
        _one_line(proc, f"s3://{BUCKET}", "refused these credentials", "InvalidAccessKeyId")
    finally:
        store.stop()


def test_inspect_and_shard_read_and_write_the_store(s3, inputs, local_build, tmp_path):
    store, client = s3
    dump, vocab = inputs
    if not keys(client, "local-2"):
        build_on_store(store, dump, vocab, f"s3://{BUCKET}/local-2", "--workers", "2", cwd=tmp_path)
    [manifest] = [k for k in keys(client, "local-2") if k.startswith("local-2/hdf5_") and k.endswith("manifest.json")]
    folder = f"s3://{BUCKET}/{manifest.rsplit('/', 1)[0]}"
    env = {**os.environ, **store.env}
    proc = run_cli("inspect", folder, env=env)
    instances = json.loads(client.get_object(Bucket=BUCKET, Key=manifest)["Body"].read())["counts"]["instances"]
    assert f"{instances:>10}  128" in proc.stdout and "total of 5 valid file(s)" in proc.stdout
    run_cli("shard", folder, "--parts", "3", "--output", f"s3://{BUCKET}/parts", env=env)
    local_parts = tmp_path / "parts"
    run_cli("shard", folder, "--parts", "3", "--output", local_parts, env=env)
    parts = {name: digest for name, digest in store_digest(client, "parts").items() if name != "manifest.json"}
    assert parts == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in local_parts.glob("*.hdf5")}
    stored = json.loads(client.get_object(Bucket=BUCKET, Key="parts/manifest.json")["Body"].read())
    assert stored["parts"] == json.loads((local_parts / "manifest.json").read_text())["parts"]
    proc = run_cli("shard", folder, "--parts", "2", "--output", f"s3://{BUCKET}/parts", env=env, check=False)
    _one_line(proc, f"s3://{BUCKET}/parts", "--force")  # nothing replaced without it
    run_cli("shard", folder, "--parts", "2", "--output", f"s3://{BUCKET}/parts", "--force", env=env)
    stored = json.loads(client.get_object(Bucket=BUCKET, Key="parts/manifest.json")["Body"].read())
    assert len(stored["parts"]) == 2  # and the third part of the first run is gone
    assert sorted(keys(client, "parts")) == sorted(f"parts/{name}" for name in
                                                   ["manifest.json", *(p["file"] for p in stored["parts"])])
    clear(client, "parts")


def test_download_to_the_store_verifies_and_keeps_what_is_there(s3, server, tmp_path):
    """`bertdata download --output s3://...` from a mirror on 127.0.0.1 (tests/mirror.py)."""
    from mirror import fake_run

    store, client = s3
    files = fake_run(server, "enwiki", "20240101")
    env = {**os.environ, **store.env}
    args = ("download", "--date", "20240101", "--mirror", server.base, "--output", f"s3://{BUCKET}/download")
    proc = run_cli(*args, env=env, cwd=tmp_path)
    stored = {k.rsplit("/", 1)[1]: client.get_object(Bucket=BUCKET, Key=k)["Body"].read()
              for k in keys(client, "download")}
    assert stored == {name: data for name, data in files.items() if "multistream" in name}
    assert f"s3://{BUCKET}/download/enwiki-20240101-pages-articles-multistream.xml.bz2" in proc.stdout
    fetched = len(server.mirror.log)
    run_cli(*args, env=env, cwd=tmp_path)  # verified where it is: only the sums are asked for again
    assert all("sha1sums" in path for path, *_ in server.mirror.log[fetched:])
    client.put_object(Bucket=BUCKET, Key="download/enwiki-20240101-pages-articles-multistream.xml.bz2", Body=b"x")
    _one_line(run_cli(*args, env=env, cwd=tmp_path, check=False), "exists but its sha1 is", "--force")
    run_cli(*args, "--force", env=env, cwd=tmp_path)
    assert client.get_object(Bucket=BUCKET, Key="download/enwiki-20240101-pages-articles-multistream.xml.bz2")[
        "Body"].read() == files["enwiki-20240101-pages-articles-multistream.xml.bz2"]
    clear(client, "download")


def test_a_recipe_on_the_store_built_on_dask_gives_the_local_bytes(s3, dask_cluster_without_shared_disk, tmp_path):
    """A recipe and its corpora on the store, read by a Dask cluster's workers that share no disk:
    mixed, deduplicated (each article twice) and decontaminated (an evaluation file on the store too)."""
    import json

    from servers import tree_digest
    from corpus_inputs import MIX, RECIPE, articles, write_corpora

    store, client = s3
    data = tmp_path / "data"
    write_corpora(data, copies=2)
    lifted = next(line for _, _, text in articles()[5:] for line in text.split("\n") if len(line.split()) > 40)
    (data / "evals.jsonl").write_text(json.dumps({"context": lifted}) + "\n")
    (data / "mixture.yaml").write_text(RECIPE + MIX + "dedup: true\n"
                                       "decontaminate: {against: [{files: evals.jsonl, text: context}]}\n")
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        put_file(client, path, f"recipe-data/{path.relative_to(data)}")
    shape = ("--format", "mds", "parquet", "--vocab", VOCAB, "--training-shards", "4", "--test-shards", "1")
    run_cli("build", "--recipe", data / "mixture.yaml", "--output", tmp_path / "local", *shape, "--workers", "2")
    scheduler_file, _ = dask_cluster_without_shared_disk
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    run_cli("build", "--recipe", f"s3://{BUCKET}/recipe-data/mixture.yaml", "--output", f"s3://{BUCKET}/recipe-out",
            *shape, "--runner", "dask", "--", f"--dask_scheduler_file={scheduler_file}", env={**clean, **store.env},
            cwd=tmp_path)
    local = tree_digest(tmp_path / "local")
    assert any(name.endswith(".ids.jsonl") for name in local)
    removed = [json.loads(line)["removed"] for line in next((tmp_path / "local").glob("sharded_*/*/dedup.jsonl"))
               .read_text().splitlines()]
    assert removed.count("exact") > 20 and 1 <= removed.count("contaminated") <= 2
    assert store_digest(client, "recipe-out") == local
