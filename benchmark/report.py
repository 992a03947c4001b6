"""Turn a run's measurements into the figures NGC publishes, plus step statistics and MFU."""

from __future__ import annotations

import json
import os

import numpy as np

from bertdata.fsutil import atomic_path

# NGC PyTorch BERT-base, seq 128, phase 1, sequences/s summed over all GPUs (global batch 67,584).
PUBLISHED_COLUMNS = ("V100 FP32 bs96", "V100 AMP bs96", "A100 TF32 bs128", "A100 AMP bs128")
PUBLISHED = {
    1: (158.6, 639.2, 873.7, 1542.3),
    8: (1232.1, 5055.6, 6846.0, 12075.6),
    32: (3496.9, 16610.6, None, None),
}

# Dense (no sparsity) peak TFLOP/s per precision, from the vendor data sheets. Matched by
# substring of torch.cuda.get_device_name(); the first match wins, so variants come first.
PEAK_TFLOPS = (
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}),
    ("H200", {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}),
    ("A100", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}),
    ("V100S", {"fp32": 16.4, "fp16": 130.0}),
    ("V100-PCIE", {"fp32": 14.0, "fp16": 112.0}),
    ("V100", {"fp32": 15.7, "fp16": 125.0}),
)

# Which arithmetic each --precision runs its matmuls in.
MATMUL_PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "amp": "fp16", "bf16": "bf16"}
PUBLISHED_PRECISION = {"fp32": "FP32", "tf32": "TF32", "fp16": "AMP", "amp": "AMP", "bf16": "AMP"}

MFU_METHOD = ("real tokens only: 6 x weights x real tokens for the encoder matmuls + 12 x layers x hidden x "
              "(each row's real length)^2 for attention scores/values, the MLM head on masked tokens only "
              "(forward + backward); pad positions, embeddings, LayerNorm, softmax left out")


def peak_tflops(device_name: str, precision: str) -> float | None:
    for key, peaks in PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            return peaks.get(MATMUL_PRECISION[precision])
    return None


def summarize(raw: dict) -> dict:
    """Add the derived figures to a run's raw measurements.

    `raw` holds per-step wall times and loader waits (timed steps only, slowest rank's
    clock), the sequences all ranks processed in them, and the training FLOPs they took.
    """
    steps = np.asarray(raw["step_times_s"], dtype=float)
    waits = np.asarray(raw["loader_wait_s"], dtype=float)
    elapsed = float(steps.sum())
    record = dict(raw)
    record.update(
        elapsed_s=elapsed,
        sequences_per_second=raw["sequences"] / elapsed,
        tokens_per_second=raw["tokens"] / elapsed,
        real_tokens_per_second=raw["real_tokens"] / elapsed,
        step_time_mean_s=float(steps.mean()),
        step_time_p50_s=float(np.percentile(steps, 50)),
        step_time_p95_s=float(np.percentile(steps, 95)),
        loader_wait_share=float(waits.sum() / elapsed),
    )
    if raw.get("flops"):
        per_device = raw["flops"] / elapsed / raw["world"]
        peak = peak_tflops(raw["device_name"], raw["precision"]) if raw["device_type"] == "cuda" else None
        record.update(tflops_per_device=per_device / 1e12, peak_tflops=peak,
                      mfu=per_device / (peak * 1e12) if peak else None, mfu_method=MFU_METHOD)
        if record.get("layout") == "padded" and peak:
            # What the padded layout ran, pad positions counted as work: the figure MFU was before.
            record["mfu_with_padding"] = raw["flops_with_padding"] / elapsed / raw["world"] / (peak * 1e12)
    return record


def dllogger_line(record: dict) -> str:
    return f"training_sequences_per_second : {record['sequences_per_second']:.1f}"


def summary_lines(record: dict) -> list[str]:
    loader = record["mode"] == "loader"
    what = "input pipeline only" if loader else f"BERT-{record['model']}, {record['precision']}"
    what += ", " + ("padded rows" if record.get("layout") == "padded" else "real tokens packed")
    if record.get("objective") == "mlm":
        what += f", masked LM alone ({record['mlm_probability']:.0%} of a {record['data_format']} folder's tokens masked)"
    lines = [
        f"{what} on {record['world']} x {record['device_name']}, "
        f"batch {record['batch_size']} x {record['accumulation']} accumulation x {record['world']} = "
        f"{record['global_batch']} sequences of {record['seq_len']} per step"
        + (", compiled" if record.get("compile") else ""),
        f"  {record['sequences_per_second']:.1f} sequences/s, {record['tokens_per_second']:.0f} tokens/s "
        f"with padding, {record['real_tokens_per_second']:.0f} real tokens/s, over {record['timed_steps']} steps "
        f"after {record['warmup_steps']} warm-up" + _data_note(record),
        f"  step time mean {record['step_time_mean_s'] * 1e3:.1f} ms, p50 {record['step_time_p50_s'] * 1e3:.1f} ms, "
        f"p95 {record['step_time_p95_s'] * 1e3:.1f} ms; waiting on the loader {record['loader_wait_share']:.1%}",
    ]
    if not loader:
        mfu = f"{record['mfu']:.1%} of {record['peak_tflops']:g} TFLOP/s peak" if record.get("mfu") \
            else "peak unknown for this device"
        if record.get("mfu_with_padding"):
            mfu += f"; {record['mfu_with_padding']:.1%} counting pad positions"
        lines.append(f"  {record['tflops_per_device']:.2f} TFLOP/s of real tokens per device (MFU {mfu}); "
                     f"loss {record['losses'][0]:.3f} -> {record['final_loss']:.3f}")
        if not record["replicas_identical"]:
            lines.append("  WARNING: model replicas differ across ranks after training")
    return lines


def _data_note(record: dict) -> str:
    if not record.get("padded_to_longest"):
        return ""
    bins = f"{record['bins']} bins" if record["bins"] > 1 else "unbinned"
    return (f" ({record['data_format'].upper()}, {bins}, {record['masking']} masking: batches padded to their "
            "longest sequence)")


def _label(record: dict) -> str:
    what = "loader" if record["mode"] == "loader" else record["precision"].upper()
    return f"{record['device_name']} {what} bs{record['batch_size']}" + (" compiled" if record.get("compile") else "")


def markdown_table(records: list[dict]) -> str:
    """The published table with one column per run added, rows by GPU count."""
    labels = [f"{_label(r)} (this run)" for r in records]
    header = ["GPUs", *PUBLISHED_COLUMNS, *labels]
    gpu_rows = sorted(set(PUBLISHED) | {r["world"] for r in records})
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for gpus in gpu_rows:
        published = PUBLISHED.get(gpus, (None,) * len(PUBLISHED_COLUMNS))
        ours = [r["sequences_per_second"] if r["world"] == gpus else None for r in records]
        cells = [str(gpus)] + [f"{v:.1f}" if v is not None else "" for v in (*published, *ours)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for label, r in zip(labels, records):
        ref_cols = [i for i, c in enumerate(PUBLISHED_COLUMNS) if c.split()[1] == PUBLISHED_PRECISION[r["precision"]]]
        refs = [(PUBLISHED_COLUMNS[i], PUBLISHED[r["world"]][i]) for i in ref_cols
                if r["world"] in PUBLISHED and PUBLISHED[r["world"]][i]]
        comparable = r["mode"] == "train" and r["device_type"] == "cuda" and r["model"] == "base" \
            and r["seq_len"] == 128
        said = [f"seq {r['seq_len']}, global batch {r['global_batch']} ({r['accumulation']} micro-batch"
                f"{'es' if r['accumulation'] > 1 else ''} of {r['batch_size']} per GPU)"]
        if r.get("mfu"):
            said.append(f"MFU {r['mfu']:.1%} on real tokens")
        if comparable and refs:
            said.append(", ".join(f"{r['sequences_per_second'] / v:.2f}x {c}" for c, v in refs) + f" at {r['world']} GPU(s)")
        notes.append(f"- {label}: " + "; ".join(said))
    seq_note = "" if all(r["seq_len"] == 128 and r["model"] == "base" for r in records) else \
        " Runs of another model or sequence length are not comparable with the published figures."
    if any(r.get("mfu") for r in records):
        notes.append(f"- MFU counts {MFU_METHOD}.")
    return "\n".join(lines + [""] + notes + [
        "", "Published: NGC PyTorch BERT-base, seq 128, phase 1, global batch 67,584, sequences/s "
        "for all GPUs together." + seq_note, ""])


def write_json(records: list[dict], path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
