"""Where a Wikimedia dump's files and checksums live, and downloading a run's files with `fetch`.

Wikimedia layout (https://dumps.wikimedia.org, mirrored under the same paths):
  {mirror}/{wiki}/{date}/{wiki}-{date}-pages-articles-multistream.xml.bz2
  {mirror}/{wiki}/{date}/{wiki}-{date}-pages-articles-multistream-index.txt.bz2
  {mirror}/{wiki}/{date}/{wiki}-{date}-sha1sums.txt     lines "<sha1>  <file name>"
  {mirror}/{wiki}/latest/{wiki}-latest-<file>           symlinks into the newest run
  {mirror}/{wiki}/latest/{wiki}-latest-<file>-rss.xml   feed whose <link> names that run
`latest` is resolved to a dated run before anything is downloaded: the latest
symlinks move job by job while a run is in progress and the sums files list the
dated names, so only a dated run gives files and checksums that belong together.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bertdata.config import BuildConfig
from bertdata.download.fetch import HTTPStatusError, fetch, fetch_text, note
from bertdata.errors import BertdataError

DUMP_SUFFIX = "pages-articles-multistream.xml.bz2"
INDEX_SUFFIX = "pages-articles-multistream-index.txt.bz2"
SUMS_SUFFIX = "sha1sums.txt"


def _is_run_date(text: str) -> bool:
    """Whether `text` is a YYYYMMDD date, as dump run directories are named."""
    try:
        return re.fullmatch(r"\d{8}", text) is not None and datetime.strptime(text, "%Y%m%d") is not None
    except ValueError:
        return False


@dataclass(frozen=True)
class DumpSpec:
    """Which Wikimedia dump: the wiki's database name, a run date (YYYYMMDD or "latest"), a mirror."""

    wiki: str = BuildConfig.wiki
    date: str = BuildConfig.date
    mirror: str = BuildConfig.mirror

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.wiki):
            raise BertdataError(
                f"--wiki must be a Wikimedia database name like enwiki or simplewiki (got {self.wiki!r})"
            )
        if self.date != "latest" and not _is_run_date(self.date):
            raise BertdataError(
                f"--date must be 'latest' or a dump run date YYYYMMDD such as 20240601 (got {self.date!r})"
            )
        if not re.match(r"https?://[^/]+", self.mirror):
            raise BertdataError(
                f"--mirror must be an http(s) URL such as {BuildConfig.mirror} (got {self.mirror!r})"
            )
        # Normalised here so every URL built from it has exactly one slash.
        object.__setattr__(self, "mirror", self.mirror.rstrip("/"))


@dataclass(frozen=True)
class DumpUrls:
    """The URLs of one dump run's multistream articles file, its index, and its sha1 sums."""

    dump: str
    index: str
    sha1sums: str


def dump_files(spec: DumpSpec) -> DumpUrls:
    """URLs of the multistream dump, its index and the run's sha1sums file.

    For `date="latest"` these are the `latest/` symlink names Wikimedia publishes;
    `download_dump` resolves `latest` to a dated run before using them.
    """
    base = f"{spec.mirror}/{spec.wiki}/{spec.date}/{spec.wiki}-{spec.date}-"
    return DumpUrls(base + DUMP_SUFFIX, base + INDEX_SUFFIX, base + SUMS_SUFFIX)


def parse_sums(text: str, source: str) -> dict[str, str]:
    """`{file name: hex digest}` from `<hex>  <name>` lines (sha1sum/md5sum output)."""
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = re.fullmatch(r"([0-9a-fA-F]{32,128}) [ *](\S.*)", line.rstrip("\r"))
        if not match:
            raise BertdataError(
                f"{source}: line {number} is not '<hex digest>  <file name>': {line[:80]!r}"
            )
        sums[match.group(2)] = match.group(1).lower()
    return sums


def _run_sums(run: DumpSpec, net: dict) -> dict[str, str] | None:
    """A dated run's sha1 sums, or None when the run has no sums file (404)."""
    url = dump_files(run).sha1sums
    try:
        return parse_sums(fetch_text(url, **net), url)
    except HTTPStatusError as err:
        if err.status == 404:
            return None
        raise


def _unlisted(run: DumpSpec, sums: dict[str, str]) -> list[str]:
    """The run's multistream files its sums file does not list yet (jobs still running)."""
    urls = dump_files(run)
    return [name for name in (_name(urls.dump), _name(urls.index)) if name not in sums]


def _name(url: str) -> str:
    return url.rsplit("/", 1)[1]


def resolve_latest(spec: DumpSpec, *, timeout: float = 30.0, retries: int = 5, backoff: float = 1.0) -> str:
    """The YYYYMMDD of the run behind `{mirror}/{wiki}/latest/`.

    First the RSS feed Wikimedia writes beside the latest multistream symlink
    (its <link> ends in the run's directory). Mirrors that drop `latest/` get the
    directory listing of `{mirror}/{wiki}/` instead: the newest dated run whose
    sha1sums file already lists both multistream files.
    """
    net = {"timeout": timeout, "retries": retries, "backoff": backoff}
    feed = f"{spec.mirror}/{spec.wiki}/latest/{spec.wiki}-latest-{DUMP_SUFFIX}-rss.xml"
    try:
        text = fetch_text(feed, **net)
    except HTTPStatusError as err:
        if err.status != 404:
            raise
    else:
        match = re.search(r"<link>[^<]*/(\d{8})/?\s*</link>", text)
        if not match or not _is_run_date(match.group(1)):
            found = f"its <link> names run {match.group(1)!r}, not a date" if match else "no <link> to a dated dump run"
            raise BertdataError(f"{feed}: {found}; pass --date YYYYMMDD")
        return match.group(1)

    listing_url = f"{spec.mirror}/{spec.wiki}/"
    try:
        listing = fetch_text(listing_url, **net)
    except HTTPStatusError as err:
        raise BertdataError(
            f"{spec.mirror} has neither {feed} nor a listing at {listing_url} (HTTP {err.status}); "
            f"pass --date YYYYMMDD"
        ) from None
    # Mirrors list other folders too; only dated ones are runs.
    dates = sorted({d for d in re.findall(r'href="(?:\./)?(\d{8})/?"', listing) if _is_run_date(d)}, reverse=True)
    # Runs take weeks; the newest one or two may be unfinished, older ones are not.
    for date in dates[:4]:
        run = DumpSpec(spec.wiki, date, spec.mirror)
        sums = _run_sums(run, net)
        if sums is not None and not _unlisted(run, sums):
            return date
    raise BertdataError(
        f"no finished {spec.wiki} multistream dump among the newest runs listed at {listing_url} "
        f"({', '.join(dates[:4]) or 'none listed'}); pass --date YYYYMMDD"
    )


def download_dump(
    spec: DumpSpec,
    out_dir: str | Path,
    progress: bool = True,
    *,
    force: bool = False,
    timeout: float = 30.0,
    retries: int = 5,
    backoff: float = 1.0,
    present: Callable[[str, str], dict | None] | None = None,
) -> dict:
    """Download a run's multistream dump and index into `out_dir`, sha1-verified.

    Returns what a manifest needs: wiki, resolved date, mirror, sums URL, and for
    "dump" and "index" the local path, URL, sha1 and size in bytes. `present(name, sha1)`
    may say where a file already is, verified ({"path", "bytes"}), so it is not fetched.
    """
    net = {"timeout": timeout, "retries": retries, "backoff": backoff}
    date = spec.date
    if date == "latest":
        date = resolve_latest(spec, **net)
        note(f"{spec.wiki} latest dump run: {date}")
    run = DumpSpec(spec.wiki, date, spec.mirror)
    urls = dump_files(run)
    sums = _run_sums(run, net)
    if sums is None:
        raise BertdataError(
            f"{urls.sha1sums} not found (HTTP 404): no {spec.wiki} dump run dated {date} on {spec.mirror}"
        )
    unlisted = _unlisted(run, sums)
    if unlisted:
        raise BertdataError(
            f"{urls.sha1sums} lists no sha1 for {', '.join(unlisted)}: that job of the {date} run "
            f"has not finished; pick an earlier --date"
        )
    record = {"wiki": spec.wiki, "date": date, "mirror": spec.mirror, "sha1sums_url": urls.sha1sums}
    for role, url in (("dump", urls.dump), ("index", urls.index)):
        name = _name(url)
        found = present(name, sums[name]) if present else None
        if found is not None:
            record[role] = {**found, "url": url, "sha1": sums[name]}
            continue
        path = fetch(url, Path(out_dir) / name, sha1=sums[name], progress=progress, force=force, **net)
        record[role] = {"path": str(path), "url": url, "sha1": sums[name], "bytes": path.stat().st_size}
    return record
