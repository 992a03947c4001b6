#!/usr/bin/env bash
# The GPU check of `bertdata bench`: one script for a machine with one NVIDIA GPU, about 8 minutes.
#
#   bash benchmark/gpu_check.sh            (from the repository root; results under $OUT or ./gpu-check)
#
# 1. finds python3 with a CUDA torch (installs torch, h5py, deflate, pyarrow from PyPI only if missing;
#    bertdata itself needs no install: a link farm lays the checkout out as pip would),
# 2. uses the reference parity shard from ../shared if present, else writes synthetic seq-128
#    shards in the reference layout (throughput does not depend on the token values),
# 3. times the input pipeline alone, then BERT-base seq 128, batch 256 on one GPU:
#    bf16 compiled (target: >= 5,000 sequences/s), fp16 AMP and TF32 compiled, bf16 and fp32 eager,
# 4. writes each run's JSON, a markdown table beside the NGC figures and the log under $OUT.
# Exit status 1 if the bf16 row misses the target or any run fails. Runs that would end past
# DEADLINE seconds (default 450) are cut short, so the whole check fits a 10-minute slot.
# Smoke test of the plumbing without a GPU: DEVICE=cpu MODEL=tiny BATCH=8 QUICK=1 TARGET_SEQS=0.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu-check}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
exec > >(tee -a "$LOG") 2>&1
START=$SECONDS
PY=${PYTHON:-python3}
TARGET=${TARGET_SEQS:-5000}
BATCH=${BATCH:-256}
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-base}
DEADLINE=${DEADLINE:-450}
if [ "${QUICK:-0}" = 1 ]; then
    STEPS=(--steps 2 --warmup-steps 1); COMPILE=()
else
    STEPS=(); COMPILE=(--compile)
fi
export PYTHONUNBUFFERED=1
# Without an install (a bare GPU machine, no build tools needed): the package as pip lays it out,
# benchmark/ and pipelines/ inside bertdata/, made of links to the checkout.
if ! "$PY" -c 'import bertdata.benchmark' 2>/dev/null; then
    SITE=$(mktemp -d)
    mkdir "$SITE/bertdata"
    ln -s "$REPO"/bertdata/* "$SITE/bertdata/"
    ln -s "$REPO/benchmark" "$SITE/bertdata/benchmark"
    ln -s "$REPO/pipelines" "$SITE/bertdata/pipelines"
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
    cd "$SITE"  # `python -m` puts the working folder first: the checkout's bertdata/ would win
fi
status=0

say() { echo "[gpu_check +$((SECONDS - START))s] $*"; }

if [ "$DEVICE" = cuda ] && ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    if "$PY" -c 'import torch' 2>/dev/null; then
        say "torch is installed but sees no CUDA device:"; nvidia-smi || true
        exit 1
    fi
    say "no torch: installing it from PyPI (a CUDA build)"
    "$PY" -m pip install -q torch || { say "cannot install torch"; exit 1; }
fi
"$PY" -c 'import h5py, numpy, tqdm, deflate, pyarrow' 2>/dev/null || "$PY" -m pip install -q h5py numpy tqdm deflate pyarrow || exit 1
"$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
[ "$DEVICE" = cuda ] && { nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv || true; }

DATA=$(mktemp -d)/data128
mkdir -p "$DATA"
PARITY=$REPO/../shared/data/parity/A_s12345_128_20_p15_d5.hdf5
if [ -f "$PARITY" ]; then
    ln -s "$PARITY" "$DATA/parity_training_0.hdf5"
    say "data: the reference parity shard (12,355 sequences of 128)"
else
    say "data: ../shared absent; writing 4 synthetic reference-layout shards of 16,384 sequences"
    "$PY" - "$DATA" <<'EOF'
import sys

import numpy as np

from bertdata.formats.hdf5io import write_shard
from bertdata.instances.schema import zeros

# Reference statistics: [CLS] A [SEP] B [SEP], 10% short sequences, 15% of tokens (at most 20)
# predicted, positions sorted and 0-padded; write_shard lays them out as the reference does.
rng = np.random.default_rng(12345)
n, seq, preds = 16384, 128, 20
for shard in range(4):
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
    write_shard(f"{sys.argv[1]}/synthetic_training_{shard}.hdf5", rows)
EOF
fi

bench() {  # name, time limit in seconds, bench flags... (later flags win)
    local name=$1 limit=$2 left=$((DEADLINE - (SECONDS - START))); shift 2
    if [ "$left" -lt 40 ]; then say "run $name skipped: past the deadline"; status=1; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    say "run $name (limit ${limit}s): bertdata bench $*"
    if ! timeout "$limit" "$PY" -m bertdata.cli bench --data "$DATA" --device "$DEVICE" --model "$MODEL" \
            --workers 4 --json "$OUT/$name.json" --force "$@" "${STEPS[@]}"; then
        say "run $name FAILED or timed out"
        status=1
    fi
}

bench loader 60 --loader-only --batch-size "$BATCH" --steps 100 --warmup-steps 10
bench bf16_compiled 180 --precision bf16 --batch-size "$BATCH" "${COMPILE[@]}" --steps 40 --warmup-steps 8
bench amp_tf32_compiled 200 --matrix --precision amp,tf32 --batch-size "$BATCH" "${COMPILE[@]}" \
    --steps 30 --warmup-steps 8
bench eager 100 --matrix --precision bf16,fp32 --batch-size "$BATCH" --steps 20 --warmup-steps 4

"$PY" - "$OUT" "$TARGET" <<'EOF'
import json
import sys
from pathlib import Path

from bertdata.benchmark import report

out, target = Path(sys.argv[1]), float(sys.argv[2])
records = []
for name in ("loader", "bf16_compiled", "amp_tf32_compiled", "eager"):
    path = out / f"{name}.json"
    if path.exists():
        records += json.loads(path.read_text())
(out / "bench_table.md").write_text(report.markdown_table(records))
print(report.markdown_table(records))
for r in records:
    mfu = f"{r['mfu']:.1%}" if r.get("mfu") else "-"
    print(f"{r['mode']:6} {r['precision']:5} compile={r['compile']!s:5} {r['sequences_per_second']:9.1f} seq/s "
          f"p50 {r['step_time_p50_s'] * 1e3:7.1f} ms  loader wait {r['loader_wait_share']:.1%}  MFU {mfu}")
bf16 = [r for r in records if r["mode"] == "train" and r["precision"] == "bf16"]
if not bf16:
    sys.exit("bf16 run missing")
best = bf16[0]["sequences_per_second"]
print(f"bf16{' compiled' if bf16[0]['compile'] else ''}: {best:.1f} sequences/s against a target of {target:.0f}: "
      + ("met" if best >= target else "MISSED"))
sys.exit(0 if best >= target else 1)
EOF
[ $? -eq 0 ] || status=1
say "done, status $status; results in $OUT"
exit $status
