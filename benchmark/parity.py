"""The GPU check's parity: the packed step (real tokens only) against the padded one, computed
as the timed run computes them (`train.forward`, compiled where the run is), on the shards of a
phase. It can fail where one parameter alone is wrong:

- dropout off: every parameter's gradient and the loss, of both layouts in the run's precision,
  against the padded step in fp32 (no TF32); each parameter's relative error of the packed step
  may be at most BAND times the padded step's in the same precision (the precision's own noise on
  that parameter), or FLOOR, whichever is larger;
- dropout on (train mode): the loss of SEEDS dropout draws per layout; the means may differ by
  at most Z standard errors, the spreads by at most SPREAD times (a layout with no dropout, or
  dropout twice, has another spread).

    python -m bertdata.benchmark.parity --data DIR --device cuda --precision bf16 --compile
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

import torch

from bertdata.benchmark.data import ShardStream, next_batch, rank_units, survey
from bertdata.benchmark.model import BertConfig, BertForPretraining, Padded, Packed
from bertdata.benchmark.train import AUTOCAST_DTYPE, forward, set_matmul_precision, to_device
from bertdata.errors import BertdataError

BAND = 4.0
FLOOR = {"fp32": 1e-5, "fp16": 1e-2, "bf16": 1e-2}  # fp16 and bf16 have 11 and 8 significant bits
FLOOR_CUDA_FP32 = 1e-4  # cuBLAS and SDPA's kernels sum in another order than the reference's
SEEDS = 8
Z = 4.0
SPREAD = 3.0


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """|got - want| / |want| over the whole tensor; 0 where both are 0."""
    diff, norm = float((got.double() - want.double()).norm()), float(want.double().norm())
    return diff / norm if norm else (0.0 if diff == 0 else float("inf"))


def batches(data: str, rows: int) -> tuple[Padded, Packed, int, int]:
    """The first `rows` rows of the data, in both layouts, and (width, max predictions)."""
    shards, reading = survey(data)
    made = []
    for packed in (False, True):  # the same seed: the same rows
        stream = ShardStream(rank_units(shards, 0, 1), rows, 1, shards, reading, packed=packed)
        made.append(next_batch(iter(stream)))
    return made[0], made[1], shards[0].max_seq_length, shards[0].max_predictions_per_seq


def loss_and_grads(net, model, batch, preds, width, compiled, autocast) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    with torch.autocast(batch[0].device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
        loss = forward(net, batch, preds, width, compiled)
    loss.backward()
    return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def check(data: str, device: torch.device, model_cfg: BertConfig, precision: str, compiled: bool,
          rows: int) -> list[str]:
    """Both checks on the data's first `rows` rows; the failures, one line each, and a report printed."""
    padded, packed, width, preds = batches(data, rows)
    padded, packed = to_device(padded, device), to_device(packed, device)
    autocast = AUTOCAST_DTYPE.get(precision)
    quiet = dataclasses.replace(model_cfg, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = BertForPretraining(quiet).to(device)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    failures = []

    set_matmul_precision("fp32")
    ref_loss, ref = loss_and_grads(model, model, padded, preds, width, False, None)
    set_matmul_precision(precision)
    model.keep_activations_in(autocast)
    net = torch.compile(model) if compiled else model
    runs = {name: loss_and_grads(net, model, batch, preds, width, compiled, autocast)
            for name, batch in (("padded", padded), ("packed", packed))}
    floor = FLOOR_CUDA_FP32 if device.type == "cuda" and autocast is None else FLOOR[precision]
    if precision == "tf32":
        floor = FLOOR["fp16"]  # TF32 multiplies in 10 bits
    worst = (0.0, "")
    for name, want in [("loss", None), *ref.items()]:
        if want is None:
            errors = [abs(runs[layout][0] - ref_loss) / abs(ref_loss) for layout in ("padded", "packed")]
        else:
            errors = [relative_error(runs[layout][1][name], want) for layout in ("padded", "packed")]
        bound = max(BAND * errors[0], floor)
        worst = max(worst, (errors[1] / bound, name))
        if not errors[1] <= bound:
            failures.append(f"{name}: packed step's relative error {errors[1]:.2e} against fp32, padded step's "
                            f"{errors[0]:.2e} (bound {bound:.2e})")
    print(f"  dropout off, {precision}{' compiled' if compiled else ''}: loss fp32 {ref_loss:.6f}, padded "
          f"{runs['padded'][0]:.6f}, packed {runs['packed'][0]:.6f}; {len(ref)} parameters, the packed step's "
          f"error at most {worst[0]:.2f} of its bound ({worst[1]})")

    model = BertForPretraining(model_cfg).to(device)  # the run's dropout; the same weights
    model.load_state_dict(state)
    model.keep_activations_in(autocast)
    model.train()
    net = torch.compile(model) if compiled else model
    losses = {"padded": [], "packed": []}
    for seed in range(SEEDS):
        for layout, batch in (("padded", padded), ("packed", packed)):
            torch.manual_seed(seed)
            loss, grads = loss_and_grads(net, model, batch, preds, width, compiled, autocast)
            if not all(torch.isfinite(g).all() for g in grads.values()):
                failures.append(f"dropout on, {layout}, seed {seed}: a gradient is not finite")
            losses[layout].append(loss)
    means = {k: statistics.fmean(v) for k, v in losses.items()}
    spreads = {k: statistics.stdev(v) for k, v in losses.items()}
    error = (spreads["padded"] ** 2 / SEEDS + spreads["packed"] ** 2 / SEEDS) ** 0.5
    ratio = spreads["packed"] / spreads["padded"] if spreads["padded"] else float("inf")
    print(f"  dropout on, {SEEDS} draws: loss padded {means['padded']:.5f} +- {spreads['padded']:.5f}, packed "
          f"{means['packed']:.5f} +- {spreads['packed']:.5f} (means {abs(means['packed'] - means['padded']) / error:.1f}"
          f" standard errors apart, spreads {ratio:.2f}x)")
    if not abs(means["packed"] - means["padded"]) <= Z * error:
        failures.append(f"dropout on: mean losses {means['padded']:.5f} (padded) and {means['packed']:.5f} (packed) "
                        f"are more than {Z:g} standard errors apart")
    if not 1 / SPREAD <= ratio <= SPREAD:
        failures.append(f"dropout on: the packed step's losses spread {ratio:.2f}x as much as the padded step's")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertdata.benchmark.parity", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, action="append", help="a folder of one phase's shards (repeat it)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--model", default="base", help="the model preset (default: base)")
    parser.add_argument("--layers", type=int, help="fewer layers than the preset's, to compile faster "
                        "(every layer runs the same code)")
    parser.add_argument("--precision", default="bf16", choices=tuple(FLOOR) + ("tf32",))
    parser.add_argument("--compile", action="store_true", help="torch.compile both steps, as the timed run does")
    parser.add_argument("--rows", type=int, default=64, help="rows of the batch (default: 64)")
    args = parser.parse_args(argv)
    try:
        cfg = BertConfig.preset(args.model)
        if args.layers:
            cfg = dataclasses.replace(cfg, layers=args.layers)
        failures = []
        for data in args.data:
            print(f"parity on {args.device}, BERT-{args.model} ({cfg.layers} layers), {data}:")
            failures += check(data, torch.device(args.device), cfg, args.precision, args.compile, args.rows)
    except BertdataError as err:
        print(f"parity: error: {err}", file=sys.stderr)
        return err.exit_code
    for line in failures:
        print(f"  FAILED {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
