#!/bin/bash
# Same bytes as another release: the fragment build (hdf5 + LDDL, both phases) and two `shard`
# runs (hdf5 and LDDL parts), made by BASELINE's bertdata and by this checkout's, compared by
# sha256 of every data file; hdf5 files by their arrays and attributes, since the hdf5 layout
# (filters, recorded in the manifests) may differ between releases. Manifests differ in their run
# times, so they are left out.
#   scripts/same_bytes.sh /path/to/baseline/.venv/bin/bertdata [WORK_DIR]
set -euo pipefail
BASELINE=${1:?usage: scripts/same_bytes.sh BASELINE_BERTDATA [WORK_DIR]}
WORK=${2:-$(mktemp -d)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=$ROOT/../shared/data
FRAGMENT=$SHARED/wiki/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2
VOCAB=$SHARED/vocab/bert-base-uncased-vocab.txt
HDF5_DIGEST='
import hashlib, sys, h5py
for path in sys.stdin.read().split():
    digest = hashlib.sha256()
    with h5py.File(path, "r") as f:
        for name in sorted(f):
            digest.update(f"{name} {f[name].dtype} {f[name].shape}".encode() + f[name][()].tobytes())
        digest.update(repr(sorted(f.attrs.items())).encode())
    print(digest.hexdigest(), " ", path, "(arrays)")
'
# Run from the work folder: an older release starts its workers with plain `python -m`, which
# imports a checkout in the current folder.
mkdir -p "$WORK" && cd "$WORK"
for who in baseline this; do
  bin=$BASELINE; [ $who = this ] && bin=$ROOT/.venv/bin/bertdata
  rm -rf "${WORK:?}/$who"; mkdir -p "$WORK/$who"
  "$bin" build --wiki-only --dump "$FRAGMENT" --vocab "$VOCAB" --output "$WORK/$who/out" --format both \
    --workers 2 > "$WORK/$who.log" 2>&1
  phase1=$(ls -d "$WORK/$who"/out/hdf5_lower_case_1_seq_len_128*/*)
  "$bin" shard "$phase1" --output "$WORK/$who/parts" --parts 7 >> "$WORK/$who.log" 2>&1
  "$bin" shard "$phase1" --output "$WORK/$who/lddl" --parts 4 --format lddl --bin-size 32 >> "$WORK/$who.log" 2>&1
  (cd "$WORK/$who" && find . -type f \( -name "*.txt" -o -name "*parquet*" -o -name ".num_samples.json" \) \
     ! -path "*/.bertdata*" | sort | xargs sha256sum
   find . -type f -name "*.hdf5" ! -path "*/.bertdata*" | sort | "$ROOT/.venv/bin/python" -c "$HDF5_DIGEST"
  ) > "$WORK/$who.sha256"
done
echo "$(wc -l < "$WORK/this.sha256") files compared (logs and lists in $WORK)"
if cmp -s "$WORK/baseline.sha256" "$WORK/this.sha256"; then echo "identical"; else
  diff "$WORK/baseline.sha256" "$WORK/this.sha256"; exit 1; fi
