"""A real S3 API (moto's standalone server) on 127.0.0.1 for the tests, and helpers to read
what a build left in it: requests go over HTTP, as they would to any S3 store."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
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


def store_digest(s3, prefix: str) -> dict[str, str]:
    """What tests/test_build.tree_digest gives for a local folder, for the objects under `prefix`."""
    out = {}
    for key in keys(s3, prefix):
        name = key[len(prefix.rstrip("/")) + 1:]
        if name == "build.log":
            continue
        data = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        if name.endswith("manifest.json"):
            manifest = json.loads(data)
            manifest.pop("run", None)
            data = json.dumps(manifest, sort_keys=True).encode()
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def clear(s3, prefix: str) -> None:
    for key in keys(s3, prefix):
        s3.delete_object(Bucket=BUCKET, Key=key)
