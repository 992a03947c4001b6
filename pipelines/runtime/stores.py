"""Object stores (s3://, gs://) behind Beam's FileSystems.

Their options come from the Beam options after `--` and, where those are silent, from the
standard environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...; STORAGE_EMULATOR_HOST for
GCS). The launcher sets them on FileSystems and hands them to every worker inside the DoFns
(`bertdata.pipelines.runtime.fsio.FilesDoFn`): a cluster worker gets none of the launcher's settings.
Before any work, each store is asked once, with short timeouts, whether its bucket is there
and these credentials may use it, so that a typo costs one line instead of a retry loop.
The output lock is a conditional create (S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`):
of two builds into one prefix, only one creates it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from bertdata.errors import BertdataError
from bertdata.fsutil import LOCK_NAME, lock_owner_text, owner_gone, this_process


@dataclass(frozen=True)
class Store:
    """An object-store scheme: the module its client needs, the extra that installs it, and the
    Beam options its environment variables stand for (the first variable set wins)."""

    scheme: str
    module: str
    extra: str
    environment: Mapping[str, tuple[str, ...]]


STORES = {
    "s3": Store("s3", "boto3", "s3", {
        "s3_endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        "s3_access_key_id": ("AWS_ACCESS_KEY_ID",),
        "s3_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
        "s3_session_token": ("AWS_SESSION_TOKEN",),
        "s3_region_name": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    }),
    # google-cloud-storage reads its own environment (GOOGLE_APPLICATION_CREDENTIALS,
    # STORAGE_EMULATOR_HOST) on each machine.
    "gs": Store("gs", "google.cloud.storage", "gcs", {}),
}
# Preflight calls give up quickly: a wrong endpoint must not hold the build in retries.
CONNECT_SECONDS = 5
READ_SECONDS = 20


def scheme(path: str) -> str | None:
    return path.split("://", 1)[0] if "://" in path else None


def store_of(path: str) -> Store | None:
    return STORES.get(scheme(path) or "")


def store_args(paths: Iterable[str | None], beam_args: Sequence[str],
               environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """`beam_args` plus, for each store that `paths` use, the options its environment sets and
    `beam_args` leave out. Unused stores add nothing (their secrets stay out of the pipeline)."""
    given = {a.split("=", 1)[0].lstrip("-") for a in beam_args}
    extra = []
    used = sorted({scheme(p) for p in paths if p and store_of(p)})
    for store in (STORES[s] for s in used):
        for option, variables in store.environment.items():
            value = next((environ[v] for v in variables if environ.get(v)), None)
            if value is not None and option not in given:
                extra.append(f"--{option}={value}")
    return (*beam_args, *sorted(extra))


def check_client(path: str) -> None:
    """One line, not an ImportError deep in Beam, when `path`'s store lacks its client."""
    store = store_of(path)
    if store is None:
        if scheme(path) not in (None, "hdfs", "file", "http", "https"):
            raise BertdataError(f"{path}: unknown storage scheme '{scheme(path)}://' (s3://, gs:// and hdfs:// work)")
        return
    try:
        # By name: the store's client module is data of its STORES entry (a third party's,
        # optional: the extra installs it), imported only for the stores a build uses.
        importlib.import_module(store.module)
    except ImportError:
        raise BertdataError(f"{path}: {store.scheme}:// paths need the {store.extra} extra: "
                            f"pip install 'bertdata[{store.extra}]'") from None


def _bucket_and_key(path: str) -> tuple[str, str]:
    bucket, _, key = path.split("://", 1)[1].partition("/")
    return bucket, key


class _S3:
    """The calls the preflight and the lock make, on boto3 with Beam's S3 options."""

    def __init__(self, options):
        import boto3
        from botocore.config import Config
        from apache_beam.options.pipeline_options import S3Options

        s3 = options.view_as(S3Options)
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=s3.s3_endpoint_url, region_name=s3.s3_region_name, use_ssl=not s3.s3_disable_ssl,
            verify=s3.s3_verify, aws_access_key_id=s3.s3_access_key_id,
            aws_secret_access_key=s3.s3_secret_access_key, aws_session_token=s3.s3_session_token,
            config=Config(connect_timeout=CONNECT_SECONDS, read_timeout=READ_SECONDS,
                          retries={"max_attempts": 2, "mode": "standard"}))

    @contextlib.contextmanager
    def errors(self, path: str) -> Iterator[None]:
        from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

        bucket = f"s3://{_bucket_and_key(path)[0]}"
        try:
            yield
        except NoCredentialsError:
            raise BertdataError(f"{path}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                                "pass -- --s3_access_key_id=... --s3_secret_access_key=...") from None
        except EndpointConnectionError as err:
            raise BertdataError(f"{path}: cannot reach the S3 endpoint ({err}); check AWS_ENDPOINT_URL or "
                                "--s3_endpoint_url") from None
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchBucket", "404"):
                raise BertdataError(f"{path}: bucket {bucket} does not exist") from None
            if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "ExpiredToken",
                        "InvalidToken"):
                raise BertdataError(f"{path}: {bucket} refused these credentials ({code}); check "
                                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or --s3_access_key_id") from None
            raise BertdataError(f"{path}: the S3 store refused ({code}: {err})") from None
        except BotoCoreError as err:
            raise BertdataError(f"{path}: S3 request failed ({err})") from None

    def check(self, path: str) -> None:
        bucket, key = _bucket_and_key(path)
        with self.errors(path):
            self.client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)

    def create(self, path: str, data: bytes) -> bool:
        """Create `path` unless it exists; whether this call created it."""
        from botocore.exceptions import ClientError

        bucket, key = _bucket_and_key(path)
        with self.errors(path):
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                    return False
                raise

    def read(self, path: str) -> bytes | None:
        """The object's bytes, or None when it is gone."""
        from botocore.exceptions import ClientError

        bucket, key = _bucket_and_key(path)
        with self.errors(path):
            try:
                got = self.client.get_object(Bucket=bucket, Key=key)
            except ClientError as err:
                if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise
            return got["Body"].read()

    def delete(self, path: str) -> None:
        bucket, key = _bucket_and_key(path)
        with self.errors(path):
            self.client.delete_object(Bucket=bucket, Key=key)


class _GCS:
    """The same calls on google-cloud-storage."""

    def __init__(self, options):
        from bertdata.pipelines.runtime.fsio import gcs_client

        self.client = gcs_client(options)

    @contextlib.contextmanager
    def errors(self, path: str) -> Iterator[None]:
        from google.api_core import exceptions
        from google.auth.exceptions import DefaultCredentialsError

        bucket = f"gs://{_bucket_and_key(path)[0]}"
        try:
            yield
        except exceptions.NotFound:
            raise BertdataError(f"{path}: bucket {bucket} does not exist") from None
        except (exceptions.Forbidden, exceptions.Unauthorized, DefaultCredentialsError) as err:
            raise BertdataError(f"{path}: {bucket} refused these credentials ({type(err).__name__}); check "
                                "GOOGLE_APPLICATION_CREDENTIALS") from None
        except (exceptions.GoogleAPIError, OSError) as err:
            raise BertdataError(f"{path}: GCS request failed ({type(err).__name__}: {err})") from None

    def _blob(self, path: str):
        bucket, key = _bucket_and_key(path)
        return self.client.bucket(bucket).blob(key)

    def check(self, path: str) -> None:
        bucket, key = _bucket_and_key(path)
        with self.errors(path):
            next(iter(self.client.list_blobs(bucket, prefix=key, max_results=1, timeout=READ_SECONDS)), None)

    def create(self, path: str, data: bytes) -> bool:
        from google.api_core import exceptions

        with self.errors(path):
            try:
                self._blob(path).upload_from_string(data, if_generation_match=0, timeout=READ_SECONDS)
                return True
            except exceptions.PreconditionFailed:
                return False

    def read(self, path: str) -> bytes | None:
        from google.api_core import exceptions

        with self.errors(path):
            try:
                return self._blob(path).download_as_bytes(timeout=READ_SECONDS)
            except exceptions.NotFound:
                return None

    def delete(self, path: str) -> None:
        from google.api_core import exceptions

        with self.errors(path), contextlib.suppress(exceptions.NotFound):
            self._blob(path).delete(timeout=READ_SECONDS)


def _client(path: str, options):
    return {"s3": _S3, "gs": _GCS}[scheme(path)](options)


def use_stores(paths: Sequence[str | None], beam_args: Sequence[str] = ()) -> tuple[str, ...]:
    """Set up this process's FileSystems for `paths` (options from `beam_args` and the
    environment) and check their stores; the Beam options, for the workers."""
    from bertdata.pipelines.runtime import fsio

    args = store_args(paths, beam_args)
    fsio.configure(args)
    preflight(paths, fsio.options())
    return args


def preflight(paths: Iterable[str | None], options) -> None:
    """Each store path's client installed, its bucket there and these credentials accepted,
    before any work; one line otherwise."""
    checked = set()
    for path in (p for p in paths if p):
        check_client(path)
        bucket = (scheme(path), _bucket_and_key(path)[0]) if store_of(path) else None
        if bucket is not None and bucket not in checked:
            checked.add(bucket)
            _client(path, options).check(path)


@contextlib.contextmanager
def store_lock(folder: str, what: str, options) -> Iterator[list[str]]:
    """`bertdata.fsutil.folder_lock` for a folder on an object store: the lock object is
    created only if absent; a dead owner's (same host, its process gone) is taken over."""
    client = _client(folder, options)
    path = folder.rstrip("/") + "/" + LOCK_NAME
    notes: list[str] = []
    while not client.create(path, json.dumps(this_process()).encode()):
        found = client.read(path)
        if found is None:
            continue  # released between the two calls
        try:
            owner = json.loads(found)
        except ValueError:
            owner = None
        if not owner_gone(owner):
            raise BertdataError(f"{folder}: another {what} is writing here ({lock_owner_text(owner, path)}); wait "
                                "for it or choose another output folder")
        client.delete(path)
        notes.append(f"took over the lock of a {what} that was killed (pid {owner['pid']})")
    try:
        yield notes
    finally:
        with contextlib.suppress(BertdataError):
            client.delete(path)
