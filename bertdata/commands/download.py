"""`bertdata download`: fetch a Wikipedia multistream dump and its index, sha1-verified."""

from __future__ import annotations

import argparse

from bertdata.commands.options import add_dump_options
from bertdata.config import BuildConfig

DESCRIPTION = """\
Download one Wikimedia dump run's articles -- the pages-articles-multistream
.xml.bz2 file and its -index.txt.bz2 -- and check both against the sha1sums
file Wikimedia publishes beside them.

  {mirror}/{wiki}/{date}/{wiki}-{date}-pages-articles-multistream.xml.bz2
  {mirror}/{wiki}/{date}/{wiki}-{date}-pages-articles-multistream-index.txt.bz2
  {mirror}/{wiki}/{date}/{wiki}-{date}-sha1sums.txt

--date latest is resolved to the dated run behind {mirror}/{wiki}/latest/
(from the RSS feed Wikimedia keeps there, or, on mirrors without latest/, the
newest run whose sums file lists both files), so the files always come from
one run and carry that run's date in their names.

Downloads are safe to interrupt (Ctrl-C, SIGTERM, SIGHUP, Ctrl-\\: exit 130, 143, 129, 131):
bytes go to NAME.part, and running the same command again resumes with an HTTP
Range request. A file is renamed to its
final name only after its sha1 matches. Files already present and verified
are not downloaded again. enwiki's dump is over 20 GB; simplewiki's a few
hundred MB.

examples:
  bertdata download                                   newest enwiki run
  bertdata download --date 20240601 --output data/download
  bertdata download --wiki simplewiki                 small wiki, for a quick try
  bertdata download --mirror https://ftp.acc.umu.se/mirror/wikimedia.org/dumps
"""

# Where `bertdata build` downloads to, so a build after a download finds the files verified.
DOWNLOAD_FOLDER = f"{BuildConfig.output}/download"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "download",
        help="download a Wikipedia dump (multistream + index), resumable and sha1-verified",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dump_options(parser)
    parser.add_argument(
        "--output", default=DOWNLOAD_FOLDER, metavar="DIR",
        help=f"folder for the downloaded files, or an s3:// or gs:// prefix: files are fetched into a "
             f"local temporary folder, verified, then copied there (default: ./{DOWNLOAD_FOLDER})",
    )
    parser.add_argument(
        "--force", action="store_true",
        help="download again files that exist but do not match the published sha1 "
             "(by default they are left alone and the command fails)",
    )
    parser.set_defaults(run=run)


def run(args) -> int:
    from bertdata.commands.stops import STOP_SIGNALS, stopped_by_signals
    from bertdata.download.dumps import DumpSpec, download_dump
    from bertdata.fsutil import make_output_folder, remove_made

    spec = DumpSpec(wiki=args.wiki, date=args.date, mirror=args.mirror)
    # What arrived stays in NAME.part for the next run to continue; a staging folder is removed.
    with stopped_by_signals(*STOP_SIGNALS):
        if "://" in args.output:
            from bertdata.pipelines.inputs import download
            from bertdata.pipelines.runtime.stores import use_stores

            use_stores([args.output])
            record = download(spec, args.output, force=args.force)
        else:
            made = make_output_folder(args.output)
            try:
                record = download_dump(spec, args.output, force=args.force)
            except BaseException:
                remove_made(made)  # nothing arrived (a run that is not found, no network): no folder left
                raise
    print(f"{record['wiki']} dump run {record['date']} from {record['mirror']}")
    for role in ("dump", "index"):
        item = record[role]
        print(f"  {role:5}  {item['path']}  {item['bytes']:,} bytes  sha1 {item['sha1']}")
    return 0
