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
# 3. checks on the device that the packed step (real tokens only) gives the padded step's loss;
# 4. times the input pipeline alone, then BERT-base on one GPU, real tokens only unless named:
#    bf16 compiled seq 128 batch 256 (target: >= 6,400 sequences/s) with a profile of its kernels,
#    bf16 compiled seq 512 batch 64, AMP and TF32 compiled, bf16 compiled with padding;
# 5. prints the host's ceiling for the build's worker curve (scripts/host_ceiling.py: what its cores give
#    independent CPU-bound processes, and how many physical cores they are);
# 6. writes each run's JSON, the profile, a markdown table beside the NGC figures and the log under $OUT.
# Exit status 1 if the parity check fails, the bf16 row misses the target or any run fails. Runs that
# would end past DEADLINE seconds (default 500) are cut short, so the whole check fits a 10-minute slot.
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
TARGET=${TARGET_SEQS:-6400}
BATCH=${BATCH:-256}
BATCH512=${BATCH512:-64}
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-base}
DEADLINE=${DEADLINE:-500}
if [ "${QUICK:-0}" = 1 ]; then
    STEPS=(--steps 2 --warmup-steps 1); COMPILE=(); BATCH512=$BATCH
else
    STEPS=(); COMPILE=(--compile)
fi
export PYTHONUNBUFFERED=1
status=0

say() { echo "[gpu_check +$((SECONDS - START))s] $*"; }

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

say "parity on $DEVICE: the packed step's loss against the padded step's, BERT-$MODEL, no dropout"
"$PY" - "$DATA/data128" "$DEVICE" "$MODEL" <<'EOF' || { say "parity FAILED"; status=1; }
import sys

import torch

from bertdata.benchmark.data import build_loader, survey
from bertdata.benchmark.model import BertConfig, BertForPretraining
from bertdata.benchmark.train import to_device

data, device, model_name = sys.argv[1], torch.device(sys.argv[2]), sys.argv[3]
shards, reading = survey(data)
torch.manual_seed(0)
model = BertForPretraining(BertConfig.preset(model_name)).to(device).eval()  # eval: no dropout
width, preds = shards[0].max_seq_length, shards[0].max_predictions_per_seq
results = []
for packed in (False, True):  # the same seed: the same rows, padded and then packed
    batch = to_device(next(iter(build_loader(shards, reading, 64, 0, 1, 0, 1, pin_memory=False, packed=packed))),
                      device)
    model.zero_grad(set_to_none=True)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        loss = model(batch, max_predictions=preds, width=width) if packed else model(*batch, max_predictions=preds)
    loss.backward()
    grads = torch.cat([p.grad.double().flatten() for p in model.parameters() if p.grad is not None])
    results.append((loss.item(), grads))
(loss_a, grad_a), (loss_b, grad_b) = results
cosine = torch.nn.functional.cosine_similarity(grad_a, grad_b, dim=0).item()
relative = abs(loss_a - loss_b) / abs(loss_a)
tolerance = 2e-2 if device.type == "cuda" else 1e-5  # bf16 on the device, fp32 elsewhere
print(f"padded loss {loss_a:.6f}, packed {loss_b:.6f} (relative {relative:.2e}); gradients' cosine {cosine:.6f}")
sys.exit(0 if relative <= tolerance and cosine >= 0.999 else 1)
EOF

bench() {  # name, data, time limit in seconds, bench flags... (later flags win)
    local name=$1 data=$2 limit=$3 left=$((DEADLINE - (SECONDS - START))); shift 3
    if [ "$left" -lt 40 ]; then say "run $name skipped: past the deadline"; status=1; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    say "run $name (limit ${limit}s): bertdata bench $*"
    if ! timeout "$limit" "$PY" -m bertdata.cli bench --data "$DATA/$data" --device "$DEVICE" --model "$MODEL" \
            --workers 4 --json "$OUT/$name.json" --force "$@" "${STEPS[@]}"; then
        say "run $name FAILED or timed out"
        status=1
    fi
}

bench loader data128 60 --loader-only --batch-size "$BATCH" --steps 100 --warmup-steps 10
bench bf16_compiled data128 150 --precision bf16 --batch-size "$BATCH" "${COMPILE[@]}" --steps 40 --warmup-steps 8 \
    --profile "$OUT/profile_bf16_compiled.txt"
bench bf16_compiled_512 data512 120 --precision bf16 --batch-size "$BATCH512" "${COMPILE[@]}" --steps 30 \
    --warmup-steps 6
bench amp_tf32_compiled data128 200 --matrix --precision amp,tf32 --batch-size "$BATCH" "${COMPILE[@]}" \
    --steps 30 --warmup-steps 8
bench bf16_compiled_padded data128 120 --precision bf16 --batch-size "$BATCH" "${COMPILE[@]}" --padded \
    --steps 30 --warmup-steps 8

"$PY" - "$OUT" "$TARGET" <<'EOF'
import json
import sys
from pathlib import Path

from bertdata.benchmark import report

out, target = Path(sys.argv[1]), float(sys.argv[2])
records = []
for name in ("loader", "bf16_compiled", "bf16_compiled_512", "amp_tf32_compiled", "bf16_compiled_padded"):
    path = out / f"{name}.json"
    if path.exists():
        records += json.loads(path.read_text())
(out / "bench_table.md").write_text(report.markdown_table(records))
print(report.markdown_table(records))
for r in records:
    mfu = f"{r['mfu']:.1%}" if r.get("mfu") else "-"
    if r.get("mfu_with_padding"):
        mfu += f" ({r['mfu_with_padding']:.1%} counting pads)"
    print(f"{r['mode']:6} {r['precision']:5} seq {r['seq_len']:3} bs {r['batch_size']:3} {r['layout']:6} "
          f"compile={r['compile']!s:5} {r['sequences_per_second']:9.1f} seq/s {r['real_tokens_per_second']:10.0f} "
          f"real tok/s  p50 {r['step_time_p50_s'] * 1e3:7.1f} ms  loader wait {r['loader_wait_share']:.1%}  MFU {mfu}")
bf16 = [r for r in records if r["mode"] == "train" and r["precision"] == "bf16" and r["seq_len"] == 128
        and r["layout"] == "packed"]
if not bf16:
    sys.exit("bf16 run missing")
best = bf16[0]["sequences_per_second"]
print(f"bf16{' compiled' if bf16[0]['compile'] else ''}: {best:.1f} sequences/s against a target of {target:.0f}: "
      + ("met" if best >= target else "MISSED"))
sys.exit(0 if best >= target else 1)
EOF
[ $? -eq 0 ] || status=1
[ -f "$OUT/profile_bf16_compiled.txt" ] && head -40 "$OUT/profile_bf16_compiled.txt"
say "done, status $status; results in $OUT"
exit $status
