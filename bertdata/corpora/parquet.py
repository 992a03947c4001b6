"""Parquet corpora (FineWeb, FineWeb-Edu, DCLM, PG-19, Hugging Face's wikimedia/wikipedia): the
text column, the id column and the columns `where:` reads, and no other, read a batch of rows
at a time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from bertdata.corpora.contract import DEFAULT_ID, CorpusSpec, CorpusType, Opener, basename, field_text, id_text
from bertdata.errors import BertdataError

# Rows turned into Python at a time: web documents are a few KB, books a few hundred.
BATCH_ROWS = 64


def _open(path: str, open_file: Opener):
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = open_file(path)
    try:
        return pq.ParquetFile(f), f
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as err:
        f.close()
        raise BertdataError(f"{path}: not a readable parquet file ({err})") from None


def _top(column: str) -> str:
    return column.split(".", 1)[0]


class Parquet(CorpusType):
    name = "parquet"
    describe = ("parquet files (FineWeb, FineWeb-Edu, DCLM, PG-19, wikimedia/wikipedia): the text: column "
                "(default text), the id: column (default: id where there is one, else the file and row), only the columns used read")

    def check(self, spec: CorpusSpec, path: str, open_file: Opener) -> None:
        import pyarrow as pa

        parquet, f = _open(path, open_file)
        with f:
            schema = parquet.schema_arrow
        wanted = [(spec.text, "the text: column")]
        if spec.id is not None:
            wanted.append((spec.id, "the id: column"))
        wanted += [(c, "which where: reads") for c in (spec.where.columns if spec.where else ())]
        for column, role in wanted:
            if _top(column) not in schema.names:
                raise BertdataError(f"{path}: no column {column!r} ({role}); its columns are "
                                    f"{', '.join(schema.names)}")
        kind = schema.field(spec.text).type if "." not in spec.text else None
        if kind is not None and not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise BertdataError(f"{path}: column {spec.text!r} (the text) holds {kind}, not strings")

    def documents(self, spec: CorpusSpec, path: str, open_file: Opener, counts: Counter) -> Iterator[tuple[str, str]]:
        import pyarrow as pa

        keeps = spec.where.keeps if spec.where else None
        name = basename(path)
        row = 0
        parquet, f = _open(path, open_file)
        with f:
            id_column = spec.id or (DEFAULT_ID if DEFAULT_ID in parquet.schema_arrow.names else None)
            columns = sorted({_top(c) for c in (spec.text, id_column, *(spec.where.columns if spec.where else ()))
                              if c is not None})
            try:
                # A reader per row group, on this thread: one over the whole file holds memory that
                # grows with the file (measured: 8 MB for 2.6 MB of parquet, 44 MB for 41 MB).
                batches = (batch for group in range(parquet.num_row_groups)
                           for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns,
                                                             row_groups=[group], use_threads=False))
                for batch in batches:
                    for record in batch.to_pylist():
                        number, row = row, row + 1
                        if keeps is not None and not keeps(record):
                            counts["filtered"] += 1
                            continue
                        text = field_text(_get(record, spec.text), f"{path}: row {number}, column {spec.text!r}")
                        if not text:
                            counts["empty"] += 1
                            continue
                        if id_column is None:
                            doc_id = f"{name}:{number}"
                        else:
                            value = _get(record, id_column)
                            if value is None:
                                raise BertdataError(f"{path}: row {number}: the id column {id_column!r} is null")
                            doc_id = id_text(value)
                        yield doc_id, text
            except (pa.ArrowException, OSError) as err:
                raise BertdataError(f"{path}: unreadable parquet at row {row} ({err})") from None


def _get(record: dict, column: str):
    from bertdata.corpora.where import MISSING, lookup

    value = lookup(record, column)
    return None if value is MISSING else value


TYPE = Parquet()
