"""Pretrain BERT on the shards for a fixed number of steps and time it, as NGC's benchmark mode does.

One optimizer step = `accumulation` micro-batches of `batch_size` per rank, gradients
all-reduced once (on the last micro-batch), then LAMB. Each step is timed on the device, from
the end of the step before to its own end (CUDA events, read once after the run: no host
sync between steps, so the host launches ahead as in real training); the first
`warmup_steps` (cuDNN/cuBLAS heuristics, torch.compile, loader start-up) are not timed, and
warm-up goes on until the optimizer has taken a real step and every loader worker has
delivered a batch (see `one_time_work_done`).

Multi-GPU: `gpus > 1` re-runs this module under torchrun, one process per GPU. Under any
torchrun (several nodes, or CPU processes) the world comes from its environment variables.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile
from tqdm import tqdm

from bertdata.benchmark import report
from bertdata.benchmark.data import Figures, build_loader, figures, next_batch, rank_units, survey
from bertdata.benchmark.lamb import build_optimizer
from bertdata.benchmark.model import BertConfig, BertForPretraining, Packed, Padded, training_bytes, training_flops
from bertdata import formats
from bertdata.formats import DOCUMENTS, Reading, PartInfo
from bertdata.config import DOCUMENT_MLM_PROBABILITY, BenchConfig
from bertdata.errors import BertdataError
from bertdata.fsutil import atomic_path

# Warm-up steps added, at most, while one-time work is still pending (see WarmUp).
MAX_EXTRA_WARMUP = 100
AUTOCAST_DTYPE = {"fp16": torch.float16, "amp": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Plan:
    """Everything resolved and checked before any work starts."""

    device: torch.device
    precision: str
    rank: int
    local_rank: int
    world: int
    accumulation: int
    global_batch: int
    parts: list[PartInfo]
    reading: Reading
    model: BertConfig
    # The masked share of a documents folder's tokens, trained masked LM alone; None: an instance
    # format's rows, masked LM + next sentence.
    mlm_probability: float | None = None

    @property
    def seq_len(self) -> int:
        return self.parts[0].max_seq_length

    @property
    def max_predictions(self) -> int:
        return self.parts[0].max_predictions_per_seq


def world_from_env() -> tuple[int, int, int]:
    """(rank, local_rank, world) as torchrun sets them; (0, 0, 1) outside torchrun."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)),
            int(os.environ.get("WORLD_SIZE", 1)))


def make_plan(cfg: BenchConfig, world: int | None = None) -> Plan:
    rank, local_rank, env_world = world_from_env()
    world = world or env_world
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise BertdataError("--device cuda but CUDA is not available (no GPU, or a CPU-only torch build)")
    device_type = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device("cuda", local_rank) if device_type == "cuda" else torch.device("cpu")
    precision = cfg.precision or ("amp" if device_type == "cuda" else "fp32")
    model = BertConfig.from_json(cfg.bert_config) if cfg.bert_config else BertConfig.preset(cfg.model)
    parts, reading = survey(cfg.data, cfg.vocab, cfg.masking_scheme)
    mlm_probability, max_predictions = None, parts[0].max_predictions_per_seq
    if formats.get(reading.format).holds == DOCUMENTS:
        if cfg.padded:
            raise BertdataError(f"{cfg.data}: a documents folder trains packed rows only; leave out --padded")
        # The model as the data needs it: the tokenizer's vocab, a position for every token of the longest sample.
        model = dataclasses.replace(model, vocab_size=reading.vocab.vocab_size,
                                    max_position=max(model.max_position, parts[0].max_seq_length))
        mlm_probability = cfg.mlm_probability or DOCUMENT_MLM_PROBABILITY
        max_predictions = math.ceil(mlm_probability * parts[0].max_seq_length)
    elif cfg.mlm_probability is not None:
        raise BertdataError(f"{cfg.data}: --mlm-probability is for a documents folder (mds, parquet); instance "
                            "shards keep the masking they were made with")
    if parts[0].max_seq_length > model.max_position:
        raise BertdataError(f"{parts[0].path}: sequence length {parts[0].max_seq_length} exceeds the model's "
                            f"max_position {model.max_position}")
    per_step = cfg.batch_size * world
    if cfg.global_batch is not None:
        if cfg.global_batch % per_step:
            raise BertdataError(
                f"--batch-size {cfg.batch_size} x {world} rank(s) = {per_step} does not divide "
                f"--global-batch {cfg.global_batch}")
        accumulation = cfg.global_batch // per_step
    else:
        accumulation = cfg.accumulation or 1
    for r in range(world):
        rank_units(parts, r, world)  # every rank must get rows
    instances = sum(s.num_instances for s in parts)
    if per_step > instances:
        ranks = f" x {world} ranks = {per_step}" if world > 1 else ""
        raise BertdataError(f"--batch-size {cfg.batch_size}{ranks} is more than the {instances:,} instances in "
                            f"{cfg.data}: every batch would hold some of them twice")
    if device.type == "cpu" and not cfg.loader_only:
        check_memory(cfg, model, parts[0].max_seq_length, max_predictions)
    return Plan(device, precision, rank, local_rank, world, accumulation, per_step * accumulation,
                parts, reading, model, mlm_probability)


# Peak RSS of CPU training runs over model.training_bytes' count (tiny at batch 64 and 256,
# base at 16, sequence length 128: 1.34, 1.21, 1.20; README, Training benchmark).
MEMORY_SCALE = 1.25


def available_memory() -> int | None:
    """Bytes this process may still allocate: the kernel's MemAvailable, or less where a cgroup
    (a container, a job scheduler) sets a lower limit. None where neither can be read."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as limit, open("/sys/fs/cgroup/memory.current") as current:
            text = limit.read().strip()
            if text != "max":
                found.append(int(text) - int(current.read()))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def check_memory(cfg: BenchConfig, model: BertConfig, seq_len: int, max_predictions: int) -> None:
    """Refuse, before allocating anything, a CPU run whose batch cannot fit in memory: it would
    grow until the kernel's OOM killer ends it, with no message."""
    available = available_memory()
    if available is None:
        return
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # CPU ranks on this machine share its memory
    fixed, per_sequence = (int(MEMORY_SCALE * n) for n in training_bytes(model, cfg.batch_size, seq_len,
                                                                         max_predictions))
    needed = ranks * (fixed + cfg.batch_size * per_sequence)
    if needed <= available:
        return
    fits = (available // ranks - fixed) // per_sequence
    advice = (f"try --batch-size {fits} or less (--accumulation keeps a larger global batch)" if fits >= 1 else
              f"the model alone needs {fixed * ranks / 1e9:.1f} GB: choose a smaller --model")
    raise BertdataError(f"--batch-size {cfg.batch_size} needs about {needed / 1e9:.1f} GB to train BERT-{cfg.model} "
                        f"at sequence length {seq_len} on CPU{f' ({ranks} ranks)' if ranks > 1 else ''}, more than "
                        f"the {available / 1e9:.1f} GB available; {advice}")


def set_matmul_precision(precision: str) -> None:
    # The one switch every torch version honours; fp32 means full IEEE, also on Ampere+.
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    torch.backends.cudnn.allow_tf32 = precision == "tf32"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def init_distributed(plan: Plan) -> None:
    if plan.world > 1 and not dist.is_initialized():
        if plan.device.type == "cuda":
            torch.cuda.set_device(plan.device)
        dist.init_process_group("nccl" if plan.device.type == "cuda" else "gloo",
                                device_id=plan.device if plan.device.type == "cuda" else None)


def all_reduce(values: list[float], op, device: torch.device) -> list[float]:
    if not dist.is_initialized():
        return values
    # gloo reduces CPU tensors, nccl CUDA ones.
    t = torch.tensor(values, dtype=torch.float64, device=device if device.type == "cuda" else "cpu")
    dist.all_reduce(t, op=op)
    return t.tolist()


def params_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def to_device(batch: Padded | Packed, device: torch.device) -> Padded | Packed:
    return type(batch)(*(t.to(device, non_blocking=True) for t in batch))


class StepClock:
    """Each step's time, from one mark to the next. On CUDA the marks are events on the device's
    stream, read once at the end: a host sync per step would drain the launch queue, and the device
    would idle while the host launched the next step's first kernels. Elsewhere the host's clock."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: list = []
        self.mark()

    def mark(self) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def laps(self) -> list[float]:
        if self.cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(self.marks, self.marks[1:])]
        return [b - a for a, b in zip(self.marks, self.marks[1:])]


def _slowest(times: list[float], waits: list[float], device: torch.device) -> tuple[list[float], list[float]]:
    """Per-step figures of the slowest rank: the step finishes when the last rank does."""
    n = len(times)
    reduced = all_reduce(times + waits, dist.ReduceOp.MAX, device)
    return reduced[:n], reduced[n:]


def _raw_record(cfg: BenchConfig, plan: Plan, mode: str, times: list[float], waits: list[float],
                warmup: int, tokens: tuple[int, int]) -> dict:
    """`tokens`: (tokens with padding, real tokens) of this rank's timed steps."""
    times, waits = _slowest(times, waits, plan.device)
    padded, real = all_reduce(list(tokens), dist.ReduceOp.SUM, plan.device)
    return dict(
        mode=mode, model=cfg.bert_config or cfg.model, device_type=plan.device.type,
        device_name=device_name(plan.device), world=plan.world, precision=plan.precision,
        batch_size=cfg.batch_size, accumulation=plan.accumulation, global_batch=plan.global_batch,
        seq_len=plan.seq_len, max_predictions=plan.max_predictions, compile=cfg.compile,
        optimizer=cfg.optimizer, lr=cfg.lr, workers=cfg.workers, timed_steps=cfg.steps,
        warmup_steps=warmup, shards=len(plan.parts), data_format=plan.reading.format,
        masking=plan.reading.masking, masking_scheme=plan.reading.masking_scheme,
        objective="mlm+nsp" if plan.mlm_probability is None else "mlm", mlm_probability=plan.mlm_probability,
        padded_to_longest=plan.reading.pad_to_longest and cfg.padded, layout="padded" if cfg.padded else "packed",
        bins=len({s.bin for s in plan.parts}), tokens=int(padded), real_tokens=int(real),
        sequences=int(all_reduce([cfg.steps * plan.accumulation * cfg.batch_size], dist.ReduceOp.SUM,
                                 plan.device)[0]),
        step_times_s=times, loader_wait_s=waits, torch_version=torch.__version__,
    )


def loader_of(cfg: BenchConfig, plan: Plan):
    return build_loader(plan.parts, plan.reading, cfg.batch_size, plan.rank, plan.world, cfg.workers, cfg.seed,
                        pin_memory=plan.device.type == "cuda", vocab_size=plan.model.vocab_size,
                        packed=not cfg.padded, token_buckets=cfg.token_buckets, mlm_probability=plan.mlm_probability)


def one_time_work_done(optimizer: torch.optim.Optimizer | None, drawn: int, workers: int) -> bool:
    """Whether the one-time work of the run is behind us, read from host state only (no device
    sync), the same on every rank:

    - the optimizer (none with --loader-only) has taken a real step: its state (two fp32 copies of
      the weights for LAMB and AdamW) is allocated on the first one, and under fp16 loss scaling
      the first steps are often skipped for overflowing gradients -- sometimes more of them than
      the warm-up has, so the allocation (and the first launch of every optimizer kernel) was timed;
    - every loader worker has delivered a batch: each reads a whole file before its first one,
      and the loader takes batches from the workers in turn."""
    return (optimizer is None or bool(optimizer.state)) and drawn >= workers


@dataclass(frozen=True)
class WarmUp:
    """When the timed steps start: after `steps` warm-up steps, and then only once the one-time
    work is done (at most `extra` steps more). A count of steps alone can end before one-time work
    is done, which then lands in the timed steps; every rank must run the same steps, hence
    `one_time_work_done`'s host state."""

    steps: int
    extra: int = MAX_EXTRA_WARMUP

    def over(self, taken: int, done: bool) -> bool:
        """Whether the step after `taken` warm-up steps is timed; `done`: the one-time work is."""
        return taken >= self.steps and (done or taken >= self.steps + self.extra)


@dataclass(frozen=True)
class StepResult:
    """One optimizer step (with --loader-only, its batches drawn and moved to the device): which
    part of the run it was, the host's wait for the loader, what its micro-batches held and the
    FLOPs they need, counted on the host, and its mean loss (a device tensor, read after the run;
    None with --loader-only). Its time comes from the StepClock."""

    phase: str  # "warm-up", "timed" or "profiled"
    wait: float
    masked: int
    tokens: int  # with padding
    real_tokens: int
    flops: float  # on real tokens
    flops_with_padding: float
    loss: torch.Tensor | None

    @classmethod
    def of(cls, phase: str, wait: float, counts: list[Figures], model: BertConfig,
           loss: torch.Tensor | None) -> StepResult:
        return cls(phase, wait, sum(c.masked for c in counts), sum(c.tokens for c in counts),
                   sum(c.real_tokens for c in counts),
                   sum(training_flops(model, c.real_tokens, c.real_pairs, c.masked) for c in counts),
                   sum(training_flops(model, c.tokens, c.pairs, c.masked) for c in counts), loss)


# Steps run under torch.profiler with --profile, after the timed ones (its hooks would slow them).
PROFILED_STEPS = 5


def train(cfg: BenchConfig, plan: Plan) -> dict:
    """The run, top to bottom: the model (none with --loader-only, which times the input pipeline
    alone: disk -> worker -> pinned memory -> device), the loader, the steps -- warm-up, timed,
    profiled -- and the record."""
    model = net = optimizer = scaler = ddp = None
    autocast_dtype = AUTOCAST_DTYPE.get(plan.precision)
    graphs = cfg.compile and cfg.token_buckets is not None and plan.device.type == "cuda"
    if not cfg.loader_only:
        set_matmul_precision(plan.precision)
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        model = BertForPretraining(plan.model, nsp=plan.mlm_probability is None).to(plan.device)
        model.keep_activations_in(autocast_dtype)
        torch.manual_seed(cfg.seed + plan.rank)  # but each rank its own dropout masks
        net = model
        if plan.world > 1:
            # DDP copies each all-reduced bucket into the .grad it finds: LAMB's views of its own buffer
            # (as bucket views, the .grad would be DDP's, and LAMB would copy it back every step).
            ddp = DistributedDataParallel(model, device_ids=[plan.device] if plan.device.type == "cuda" else None,
                                          gradient_as_bucket_view=False)
            net = ddp
        if cfg.compile:
            # DDP first, then compile: dynamo splits the graph at DDP's bucket boundaries so
            # all-reduce still overlaps the backward pass. With token buckets on CUDA, the one graph
            # (dynamic in the token count) is recorded as a CUDA graph once per bucket, then replayed.
            net = torch.compile(net, mode="reduce-overhead" if graphs else None)
        optimizer = build_optimizer(cfg.optimizer, model, cfg.lr, plan.device, compile=cfg.compile)
        # fp16 needs loss scaling (its range underflows small gradients); bf16 has fp32's range.
        scaler = torch.amp.GradScaler(plan.device.type, enabled=autocast_dtype is torch.float16)
    batches = iter(loader_of(cfg, plan))

    warm_up = WarmUp(cfg.warmup_steps)
    profiled = PROFILED_STEPS if cfg.profile else 0
    results: list[StepResult] = []
    warmup = timed = drawn = 0  # timed: the steps after warm-up, profiled ones too
    shapes: set[tuple] = set()
    clock = StepClock(plan.device)
    label = "loader" if cfg.loader_only else f"BERT-{cfg.model} {plan.precision} bs{cfg.batch_size}"
    # disable=None: the bar only on a terminal.
    with tqdm(total=cfg.warmup_steps + cfg.steps + profiled, desc=label, unit="step", file=sys.stderr,
              disable=None if plan.rank == 0 else True, leave=False) as bar, contextlib.ExitStack() as profiling:
        while timed < cfg.steps + profiled:
            if timed == cfg.steps:  # and profiled > 0: the timed steps are done, the profiled ones follow
                prof = profiling.enter_context(profile(activities=[ProfilerActivity.CPU] + (
                    [ProfilerActivity.CUDA] if plan.device.type == "cuda" else [])))
            phase = ("profiled" if timed >= cfg.steps else
                     "timed" if warm_up.over(warmup, one_time_work_done(optimizer, drawn, cfg.workers)) else
                     "warm-up")
            wait, counts = 0.0, []
            loss_sum = None if cfg.loader_only else torch.zeros((), device=plan.device)
            for micro in range(plan.accumulation):
                start = time.perf_counter()
                batch = next_batch(batches)
                if cfg.loader_only:  # the copy is the pipeline's last leg; figures() reads the host copy
                    to_device(batch, plan.device)
                wait += time.perf_counter() - start
                drawn += 1
                counts.append(figures(batch, plan.seq_len))  # on the host copy: no device sync
                if cfg.loader_only:
                    continue
                shapes.add(tuple(tuple(t.shape) for t in batch))
                batch = to_device(batch, plan.device)
                last = micro == plan.accumulation - 1
                if graphs:
                    torch.compiler.cudagraph_mark_step_begin()  # the last replay's outputs are read
                with ddp.no_sync() if ddp is not None and not last else contextlib.nullcontext():
                    with torch.autocast(plan.device.type, dtype=autocast_dtype or torch.float32,
                                        enabled=autocast_dtype is not None):
                        loss = forward(net, batch, plan.max_predictions, plan.seq_len, cfg.compile)
                    scaler.scale(loss / plan.accumulation).backward()
                loss_sum += loss.detach()
            if not cfg.loader_only:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
            results.append(StepResult.of(phase, wait, counts, plan.model,
                                         None if loss_sum is None else loss_sum / plan.accumulation))
            clock.mark()
            if phase == "warm-up":
                warmup += 1
                bar.total = warmup + cfg.steps + profiled
            else:
                timed += 1
            if phase == "profiled":
                synchronize(plan.device)  # the profile holds each step's kernels whole
            bar.update()
    if profiled:
        sort = "self_device_time_total" if plan.device.type == "cuda" else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=sort, row_limit=30, max_name_column_width=90)
        with atomic_path(cfg.profile) as tmp:
            tmp.write_text(f"{PROFILED_STEPS} steps after the timed ones, kernels by their own time:\n{table}\n")
        prof.export_chrome_trace(str(cfg.profile) + ".trace.json")

    timed_results = [r for r in results if r.phase == "timed"]
    times = [lap for lap, r in zip(clock.laps(), results) if r.phase == "timed"]
    tokens = (sum(r.tokens for r in timed_results), sum(r.real_tokens for r in timed_results))
    raw = _raw_record(cfg, plan, "loader" if cfg.loader_only else "train", times,
                      [r.wait for r in timed_results], warmup, tokens)
    if cfg.loader_only:
        return report.summarize(raw)
    losses = [float(r.loss) for r in results if r.phase != "profiled"]
    digests = [params_digest(model)]
    if dist.is_initialized():
        digests = [None] * plan.world
        dist.all_gather_object(digests, params_digest(model))
    total_masked, flops, flops_padded = all_reduce(
        [sum(r.masked for r in timed_results), sum(r.flops for r in timed_results),
         sum(r.flops_with_padding for r in timed_results)], dist.ReduceOp.SUM, plan.device)
    raw.update(
        params=sum(p.numel() for p in model.parameters()),
        flops=flops, flops_with_padding=flops_padded,
        masked_tokens=int(total_masked), batch_shapes=len(shapes), token_buckets=cfg.token_buckets,
        losses=losses, final_loss=losses[-1],
        param_sha256=digests, replicas_identical=len(set(digests)) == 1,
    )
    return report.summarize(raw)


def forward(net: torch.nn.Module, batch: Padded | Packed, max_predictions: int, width: int,
            compiled: bool) -> torch.Tensor:
    """The step's loss as the timed run computes it (also the GPU check's parity)."""
    if isinstance(batch, Packed) and compiled:
        # Every batch holds another number of real and masked tokens: one graph for all of them
        # from the first call on, rather than one per count, or one for the first and a second
        # once dynamo sees the count change.
        for t in (batch.input_ids, batch.segment_ids, batch.positions, batch.index, batch.mlm_index,
                  batch.mlm_labels):
            torch._dynamo.maybe_mark_dynamic(t, 0)
    return net(batch, max_predictions=max_predictions, width=width)


def run(cfg: BenchConfig) -> dict:
    """One benchmark run in this process (one rank of it under torchrun); the same record on every rank."""
    plan = make_plan(cfg)
    init_distributed(plan)
    try:
        return train(cfg, plan)
    except (MemoryError, torch.OutOfMemoryError, torch.cuda.OutOfMemoryError):
        advice = (f"try --batch-size {cfg.batch_size // 2}, with --accumulation {2 * plan.accumulation} to keep the "
                  f"global batch of {plan.global_batch}" if cfg.batch_size > 1 else "choose a smaller --model")
        raise BertdataError(f"out of memory on {device_name(plan.device)} with --batch-size {cfg.batch_size} "
                            f"(BERT-{cfg.model}, sequence length {plan.seq_len}, {plan.precision}): {advice}") from None


def execute(configs: list[BenchConfig], json_path: str | None = None) -> int:
    """Validate every run, then run them here -- or under torchrun when `gpus > 1` -- and report."""
    gpus = configs[0].gpus
    inside_torchrun = "WORLD_SIZE" in os.environ
    if gpus > 1 and inside_torchrun:
        raise BertdataError("--gpus starts torchrun itself; under torchrun leave it out")
    if gpus > 1 and torch.cuda.device_count() < gpus:
        raise BertdataError(f"--gpus {gpus} but only {torch.cuda.device_count()} CUDA device(s) are visible")
    for cfg in configs:
        make_plan(cfg, world=gpus if gpus > 1 else None)
    if gpus > 1:
        return relaunch(configs, json_path)
    records = []
    try:
        for cfg in configs:
            records.append(run(cfg))
            if world_from_env()[0] == 0:
                print("\n".join(report.summary_lines(records[-1])), flush=True)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if world_from_env()[0] == 0:
        print()
        print(report.markdown_table(records))
        if json_path:
            report.write_json(records, json_path)
        print(report.dllogger_line(records[-1]))
    return 0


def relaunch(configs: list[BenchConfig], json_path: str | None) -> int:
    payload = json.dumps([dataclasses.asdict(dataclasses.replace(c, gpus=1)) for c in configs])
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={configs[0].gpus}", "-m", "bertdata.benchmark.train", "--configs", payload]
    if json_path:
        command += ["--json", json_path]
    return subprocess.run(command).returncode


def main(argv: list[str] | None = None) -> int:
    """Entry point of each torchrun worker started by `relaunch`."""
    parser = argparse.ArgumentParser(prog="python -m bertdata.benchmark.train")
    parser.add_argument("--configs", required=True, help="JSON list of BenchConfig fields")
    parser.add_argument("--json", help="write the records here (rank 0)")
    args = parser.parse_args(argv)
    try:
        return execute([BenchConfig(**c) for c in json.loads(args.configs)], args.json)
    except BertdataError as err:
        print(f"bertdata bench: error: {err}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
