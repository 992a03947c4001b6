"""Real servers on 127.0.0.1 for the tests and benchmarks: an S3 API (moto's standalone
server; requests go over HTTP, as to any S3 store) and a Dask cluster whose workers share no
disk; and the digest of what a build left, wherever it lies."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

BUCKET = "wiki"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    """moto's server in its own process; `env` is what a client needs to reach it."""

    def __init__(self, log: Path, **server_env: str):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}
        self.log = open(log, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=self.log, env={**os.environ, **server_env})
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None and time.time() < deadline, f"moto server did not start: {log}"
                time.sleep(0.1)

    def client(self):
        import boto3

        return boto3.session.Session().client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                              aws_access_key_id="testing", aws_secret_access_key="testing")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


def put_file(s3, path: Path, key: str) -> str:
    s3.upload_file(str(path), BUCKET, key)
    return f"s3://{BUCKET}/{key}"


def keys(s3, prefix: str) -> list[str]:
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix.rstrip("/") + "/"):
        found += [o["Key"] for o in page.get("Contents", [])]
    return found


def digest(files: Iterable[tuple[str, bytes]]) -> dict[str, str]:
    """sha256 by name of a build's files (manifests without their run record; no log)."""
    out = {}
    for name, data in files:
        if name == "build.log":
            continue
        if name.endswith("manifest.json"):
            manifest = json.loads(data)
            manifest.pop("run", None)
            data = json.dumps(manifest, sort_keys=True).encode()
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def store_digest(s3, prefix: str) -> dict[str, str]:
    """`digest` of the objects under `prefix`."""
    return digest((key[len(prefix.rstrip("/")) + 1:], s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
                  for key in keys(s3, prefix))


def clear(s3, prefix: str) -> None:
    for key in keys(s3, prefix):
        s3.delete_object(Bucket=BUCKET, Key=key)


def dask_cluster(folder: Path, env: dict, log) -> tuple[Path, list[subprocess.Popen]]:
    """A scheduler and two single-threaded `dask worker` processes on 127.0.0.1, each worker in
    its own working folder and TMPDIR under `folder`; stop them with `stop_all`."""
    scheduler_file = folder / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    procs = [subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(scheduler_file)], stdout=log, stderr=log, env=env)]
    try:
        deadline = time.time() + 60
        while not scheduler_file.exists():
            assert time.time() < deadline, "dask scheduler did not start"
            time.sleep(0.2)
        for n in range(2):
            own = folder / f"worker{n}"
            (own / "tmp").mkdir(parents=True)
            procs.append(subprocess.Popen(
                [*dask, "worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1", "--nworkers", "1",
                 "--no-dashboard", "--host", "127.0.0.1", "--memory-limit", "8GiB", "--local-directory", str(own)],
                stdout=log, stderr=log, cwd=own, env={**env, "TMPDIR": str(own / "tmp")}))
        from distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
    except BaseException:
        stop_all(procs)
        raise
    return scheduler_file, procs


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every data file under root (manifests without their run record; no log)."""
    return digest((str(path.relative_to(root)), path.read_bytes()) for path in sorted(root.rglob("*"))
                  if path.is_file())
