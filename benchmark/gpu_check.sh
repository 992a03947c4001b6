#!/usr/bin/env bash
# The GPU check of `bertdata bench`: one script for a machine with one NVIDIA GPU, under 9 minutes.
#
#   bash benchmark/gpu_check.sh            (from a checkout; results under $OUT or ./gpu-check)
#
# It needs python3 with a CUDA torch, h5py, numpy, tqdm, setuptools and a C compiler, and nothing
# else: no package registry, no install of bertdata, no ../shared.
# 1. where bertdata is not installed, builds its compiled modules in place with the local compiler
#    (no build isolation, no downloads) and lays the checkout out as pip would (a link farm);
# 2. reads the reference parity shards (seq 128 and 512) from SHARDS, ../shared/data/parity or
#    .device/parity, else writes synthetic shards in the reference layout (the padding then differs
#    from real data's, and with it the real-token figures);
# 3. checks on the device, at both lengths, that the packed step (real tokens only) gives the padded
#    step's loss and every parameter's gradient, compiled in bf16 as timed (benchmark/parity.py);
# 4. times the input pipeline alone, then BERT-base on one GPU, real tokens only unless named:
#    bf16 compiled seq 128 batch 256 (target: >= 7,000 sequences/s, 45% MFU on real tokens) with a
#    profile of its kernels, bf16 compiled seq 512 batch 64 (target: >= 42% MFU), both again with a
#    global batch by accumulation as NGC's tables run, with CUDA graphs over 4 token buckets, bf16
#    compiled with padding, AMP and TF32 compiled; then today's objective: masked LM alone (30% masked) on an
#    MDS folder of samples of up to 1,024 tokens, bf16 compiled batch 32 (no target: a figure to record);
# 5. prints the host's ceiling for the build's worker curve (scripts/host_ceiling.py: what its cores give
#    independent CPU-bound processes, and how many physical cores they are);
# 6. writes each run's JSON, the profile, a markdown table beside the NGC figures and the log under $OUT.
# Exit status 1 if the parity check fails, a bf16 row misses its target or any run fails. Runs that
# would end past DEADLINE seconds (default 540) are cut short, so the whole check fits a 10-minute slot.
# Smoke test of the same path without a GPU: DEVICE=cpu MODEL=tiny BATCH=8 QUICK=1 TARGET_SEQS=0.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu-check}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
exec > >(tee -a "$LOG") 2>&1
START=$SECONDS
PY=${PYTHON:-python3}
TARGET=${TARGET_SEQS:-7000}
TARGET512=${TARGET_MFU512:-0.42}
BATCH=${BATCH:-256}
BATCH512=${BATCH512:-64}
BATCH1024=${BATCH1024:-32}
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-base}
DEADLINE=${DEADLINE:-540}
GLOBAL128=${GLOBAL128:-8192}  # NGC's phase-1 LAMB batch (65,536) per GPU of 8; accumulation 32 at batch 256
GLOBAL512=${GLOBAL512:-4096}  # phase 2's (32,768) per GPU of 8; accumulation 64 at batch 64
if [ "${QUICK:-0}" = 1 ]; then
    # The smoke test: the same runs, each at a third of its limit at most. One timed step, one
    # loader worker (each one reads a whole file, and warm-up waits for a batch from every one), a
    # quarter of the batch at seq 512 (the same tokens), two micro-batches per global batch; the
    # parity in fp32 on 4 rows, as 16 bits are emulated on a CPU (BERT-tiny bf16 takes 12x fp32's time).
    # An eighth of the batch at seq 1,024.
    STEPS=(--steps 1 --warmup-steps 1); COMPILE=(); BATCH512=$(( (BATCH + 3) / 4 )); BATCH1024=$(( (BATCH + 7) / 8 ))
    WORKERS=1
    GLOBAL128=$((2 * BATCH)); GLOBAL512=$((2 * BATCH512)); PARITY=(--precision fp32 --rows 4)
else
    STEPS=(); COMPILE=(--compile); WORKERS=4
    PARITY=(--precision bf16 --compile --layers "${PARITY_LAYERS:-2}")
fi
export PYTHONUNBUFFERED=1
status=0

say() { echo "[gpu_check +$((SECONDS - START))s] $*"; }
# name, limit in seconds, command...: the command under `timeout`, then the wall and CPU seconds it took
# against its limit (the smoke test holds every run to a third of its limit).
timed() {
    local name=$1 limit=$2; shift 2
    local TIMEFORMAT="[gpu_check] run $name took %0R s wall, %1U s user + %1S s system CPU, of its limit $limit s"
    time timeout "$limit" "$@"
}

for module in torch h5py numpy tqdm; do
    "$PY" -c "import $module" 2>/dev/null || { say "$PY has no $module: install it first (this check installs nothing)"; exit 1; }
done
if [ "$DEVICE" = cuda ] && ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    say "torch is installed but sees no CUDA device:"; nvidia-smi || true
    exit 1
fi

# Without an install: the compiled modules built here, then the package as pip lays it out,
# benchmark/ and pipelines/ inside bertdata/, made of links to the checkout.
if ! "$PY" -c 'import bertdata.benchmark.train' 2>/dev/null; then
    say "bertdata is not installed: building its compiled modules in place"
    BUILD=$(mktemp -d)
    if ! "$PY" setup.py build_ext --inplace --build-temp "$BUILD" \
            -j "$(nproc)" >"$OUT/build_ext.log" 2>&1; then
        tail -20 "$OUT/build_ext.log"
        say "cannot build the compiled modules (needs setuptools >= 77, a C compiler and Python headers)"
        exit 1
    fi
    SITE=$(mktemp -d)
    mkdir "$SITE/bertdata"
    ln -s "$REPO"/bertdata/* "$SITE/bertdata/"
    ln -s "$REPO/benchmark" "$SITE/bertdata/benchmark"
    ln -s "$REPO/pipelines" "$SITE/bertdata/pipelines"
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    cd "$SITE"  # `python -m` puts the working folder first: the checkout's bertdata/ would win
    "$PY" -c 'import bertdata.benchmark.train' || { say "bertdata does not import from the link farm"; exit 1; }
fi
"$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
[ "$DEVICE" = cuda ] && { nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv || true; }
"$PY" "$REPO/scripts/host_ceiling.py" || say "host ceiling not measured"

DATA=$(mktemp -d)
mkdir -p "$DATA/data128" "$DATA/data512"
for dir in "${SHARDS:-}" "$REPO/../shared/data/parity" "$REPO/.device/parity"; do
    if [ -n "$dir" ] && [ -f "$dir/A_s12345_128_20_p15_d5.hdf5" ] && [ -f "$dir/A_s12345_512_80_p15_d2.hdf5" ]; then
        ln -s "$(cd "$dir" && pwd)/A_s12345_128_20_p15_d5.hdf5" "$DATA/data128/parity_training_0.hdf5"
        ln -s "$(cd "$dir" && pwd)/A_s12345_512_80_p15_d2.hdf5" "$DATA/data512/parity_training_0.hdf5"
        say "data: the reference parity shards in $dir (phase 1: 12,355 sequences of 128; phase 2: of 512)"
        break
    fi
done
if [ ! -e "$DATA/data128/parity_training_0.hdf5" ]; then
    say "data: no parity shards; writing synthetic reference-layout shards (seq 128 and 512)"
    "$PY" - "$DATA" <<'EOF' || exit 1
import sys

import numpy as np

from bertdata.formats.hdf5io import write_shard
from bertdata.instances.schema import zeros

# Reference statistics: [CLS] A [SEP] B [SEP], 10% short sequences, 15% of tokens predicted
# (at most the phase's count), positions sorted and 0-padded; write_shard lays them out as the reference does.
rng = np.random.default_rng(12345)
for folder, n, seq, preds in (("data128", 16384, 128, 20), ("data512", 4096, 512, 80)):
    rows = zeros(n, seq, preds)
    lengths = np.where(rng.random(n) < 0.1, rng.integers(20, seq, n), seq)
    real = np.arange(seq) < lengths[:, None]
    ids = np.where(real, rng.integers(1000, 30522, (n, seq)), 0)
    ids[:, 0] = 101
    rows["input_mask"][real] = 1
    rows["segment_ids"][real & (np.arange(seq) > (lengths // 2)[:, None])] = 1
    for i, length in enumerate(lengths):
        k = min(preds, max(1, round((length - 3) * 0.15)))
        chosen = np.sort(rng.choice(np.arange(1, length - 1), k, replace=False))
        rows["masked_lm_positions"][i, :k] = chosen
        rows["masked_lm_ids"][i, :k] = ids[i, chosen]
        ids[i, chosen] = 103
    rows["input_ids"][:] = ids
    rows["next_sentence_labels"][:] = rng.integers(0, 2, n)
    write_shard(f"{sys.argv[1]}/{folder}/synthetic_training_0.hdf5", rows)
EOF
fi

# An MDS folder as a build writes it (the same samples, writer and manifest options) without Beam: the
# checkout's text shard in samples of up to 1,024 tokens, its copies making a split big enough to time.
say "data: an MDS folder of tests/data/shard_A.txt in samples of up to 1,024 tokens"
"$PY" - "$REPO" "$DATA/mds1024" <<'EOF' || exit 1
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from bertdata.formats.mds import finish_local_split, write_part
from bertdata.instances.documents import read_documents
from bertdata.instances.samples import make_samples
from bertdata.instances.tokenize import WordPiece
from bertdata.instances.vocab import load_vocab

repo, out = Path(sys.argv[1]), Path(sys.argv[2])
vocab = load_vocab(repo / "tests/data/vocab.txt")
tokenizer = WordPiece(vocab, lowercase=True)
samples = make_samples(read_documents(repo / "tests/data/shard_A.txt", tokenizer), tokenizer, 1024, "shard_A")
parts = out / ".parts"
parts.mkdir(parents=True)
finish_local_split([write_part(replace(samples, source=f"shard_A_{i}"), parts) for i in range(8)], parts, out / "train")
shutil.rmtree(parts)
(out / "manifest.json").write_text(json.dumps({"format": "mds", "options": {
    "tokenizer": "vocab.txt", "tokenizer_sha256": vocab.sha256, "vocab_size": len(vocab), "max_seq_length": 1024}}))
print(f"{8 * len(samples)} samples, {8 * int(samples.offsets[-1]):,} tokens")
EOF

# The parity of the packed step with the padded one, per parameter, at both lengths (benchmark/parity.py):
# on the device in bf16 compiled as the timed runs are, with BERT-base's width and PARITY_LAYERS of its
# layers (every layer runs the same code; all 12 would take minutes to compile four times).
say "parity on $DEVICE: the packed step's loss and gradients against the padded step's, per parameter"
if ! timed parity 240 "$PY" -m bertdata.benchmark.parity --data "$DATA/data128" --data "$DATA/data512" \
        --device "$DEVICE" --model "$MODEL" "${PARITY[@]}"; then
    say "parity FAILED"
    status=1
fi

bench() {  # name, data, time limit in seconds, bench flags... (later flags win)
    local name=$1 data=$2 limit=$3 left=$((DEADLINE - (SECONDS - START))); shift 3
    if [ "$left" -lt 40 ]; then say "run $name skipped: past the deadline"; status=1; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    say "run $name (limit ${limit}s): bertdata bench $*"
    if ! timed "$name" "$limit" "$PY" -m bertdata.cli bench --data "$DATA/$data" --device "$DEVICE" \
            --model "$MODEL" --workers "$WORKERS" --json "$OUT/$name.json" --force "$@" "${STEPS[@]}"; then
        say "run $name FAILED or timed out"
        status=1
    fi
}

# Most wanted first: a run that would end past DEADLINE is skipped.
bench loader data128 60 --loader-only --batch-size "$BATCH" --steps 100 --warmup-steps 10
bench bf16_compiled data128 150 --precision bf16 --batch-size "$BATCH" "${COMPILE[@]}" --steps 40 --warmup-steps 8 \
    --profile "$OUT/profile_bf16_compiled.txt"
bench bf16_compiled_512 data512 120 --precision bf16 --batch-size "$BATCH512" "${COMPILE[@]}" --steps 30 \
    --warmup-steps 6
# NGC's tables run a global batch by accumulation: the same step, the optimizer once per GLOBAL sequences.
bench bf16_compiled_global data128 120 --precision bf16 --batch-size "$BATCH" --global-batch "$GLOBAL128" \
    "${COMPILE[@]}" --steps 4 --warmup-steps 1
bench bf16_compiled_512_global data512 120 --precision bf16 --batch-size "$BATCH512" --global-batch "$GLOBAL512" \
    "${COMPILE[@]}" --steps 3 --warmup-steps 1
# CUDA graphs: the packed batches rounded up to 4 token counts, one graph recorded for each.
bench bf16_compiled_graphs data128 150 --precision bf16 --batch-size "$BATCH" --token-buckets 4 "${COMPILE[@]}" \
    --steps 40 --warmup-steps 8
bench bf16_compiled_padded data128 120 --precision bf16 --batch-size "$BATCH" "${COMPILE[@]}" --padded \
    --steps 30 --warmup-steps 8
bench amp_tf32_compiled data128 200 --matrix --precision amp,tf32 --batch-size "$BATCH" "${COMPILE[@]}" \
    --steps 30 --warmup-steps 8
# Today's objective: masked LM alone, 30% of each sample masked at load time, samples of up to 1,024 tokens.
bench bf16_compiled_mds1024 mds1024 120 --precision bf16 --batch-size "$BATCH1024" "${COMPILE[@]}" \
    --vocab "$REPO/tests/data/vocab.txt" --steps 20 --warmup-steps 5

"$PY" - "$OUT" "$TARGET" "$TARGET512" <<'EOF'
import json
import sys
from pathlib import Path

from bertdata.benchmark import report

out, target, target512 = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
records = []
for name in ("loader", "bf16_compiled", "bf16_compiled_512", "bf16_compiled_global", "bf16_compiled_512_global",
             "bf16_compiled_graphs", "bf16_compiled_padded", "amp_tf32_compiled", "bf16_compiled_mds1024"):
    path = out / f"{name}.json"
    if path.exists():
        records += json.loads(path.read_text())
(out / "bench_table.md").write_text(report.markdown_table(records))
print(report.markdown_table(records))
for r in records:
    mfu = f"{r['mfu']:.1%}" if r.get("mfu") else "-"
    if r.get("mfu_with_padding"):
        mfu += f" ({r['mfu_with_padding']:.1%} counting pads)"
    print(f"{r['mode']:6} {r['precision']:5} seq {r['seq_len']:4} bs {r['batch_size']:3} x {r['accumulation']:2} "
          f"{r['layout']:6} {r.get('objective', 'mlm+nsp'):7} "
          f"compile={r['compile']!s:5} {r['sequences_per_second']:9.1f} seq/s {r['real_tokens_per_second']:10.0f} "
          f"real tok/s  p50 {r['step_time_p50_s'] * 1e3:7.1f} ms  loader wait {r['loader_wait_share']:.1%}  MFU {mfu}")
bf16 = [r for r in records if r["mode"] == "train" and r["precision"] == "bf16" and r["seq_len"] == 128
        and r["layout"] == "packed"]
if not bf16:
    sys.exit("bf16 run missing")
best = bf16[0]["sequences_per_second"]
print(f"bf16{' compiled' if bf16[0]['compile'] else ''}: {best:.1f} sequences/s against a target of {target:.0f}: "
      + ("met" if best >= target else "MISSED"))
met = best >= target
long = [r for r in records if r["mode"] == "train" and r["seq_len"] == 512 and r["accumulation"] == 1]
if long and long[0].get("mfu"):  # a CPU has no known peak
    print(f"bf16 seq 512: {long[0]['mfu']:.1%} MFU on real tokens against a target of {target512:.0%}: "
          + ("met" if long[0]["mfu"] >= target512 else "MISSED"))
    met = met and long[0]["mfu"] >= target512
sys.exit(0 if met else 1)
EOF
[ $? -eq 0 ] || status=1
[ -f "$OUT/profile_bf16_compiled.txt" ] && head -40 "$OUT/profile_bf16_compiled.txt"
say "done, status $status; results in $OUT"
exit $status
