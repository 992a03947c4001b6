"""`bertdata bench`: model, LAMB, input pipeline, training loop, report and CLI, on CPU."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the bench extra (torch) is not installed")

from bertdata.benchmark import report  # noqa: E402
from bertdata.benchmark.data import (  # noqa: E402
    ShardStream, Unit, bucket_size, divide, figures, mlm_labels, rank_units, survey, to_batch, to_packed,
)
from bertdata.benchmark.lamb import Lamb, build_optimizer, param_groups  # noqa: E402
from bertdata.benchmark.model import PRESETS, BertConfig, BertForPretraining, Padded, training_flops  # noqa: E402
from bertdata.benchmark.train import execute, make_plan, run  # noqa: E402
from bertdata.config import MODELS, BenchConfig  # noqa: E402
from bertdata.cli import main as cli_main  # noqa: E402
from bertdata.errors import BertdataError  # noqa: E402
from conftest import PARITY_128, PARITY_512, ROOT, needs_test_data  # noqa: E402
from shards import hostile_files  # noqa: E402



def training_dir(tmp_path: Path, *shards: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    for i, shard in enumerate(shards):
        (folder / f"parity_training_{i}.hdf5").symlink_to(shard)
    return folder


def write_shard(path: Path, n: int, seq_len: int = 16, preds: int = 3) -> None:
    """A small shard in the reference layout; row i has input_ids[i, 1] == i + 1000."""
    ids = np.full((n, seq_len), 5, dtype="i4")
    ids[:, 1] = np.arange(n) + 1000
    positions = np.zeros((n, preds), dtype="i4")
    positions[:, 0], positions[:, 1] = 2, 4
    with h5py.File(path, "w") as f:
        f["input_ids"] = ids
        f["input_mask"] = np.ones((n, seq_len), dtype="i1")
        f["segment_ids"] = np.zeros((n, seq_len), dtype="i1")
        f["masked_lm_positions"] = positions
        f["masked_lm_ids"] = np.where(positions > 0, 7, 0).astype("i4")
        f["next_sentence_labels"] = (np.arange(n) % 2).astype("i1")


def tiny_cfg(data: Path, **kw) -> BenchConfig:
    base = dict(data=str(data), model="tiny", device="cpu", batch_size=8, steps=3, warmup_steps=1,
                workers=0, precision="fp32")
    return BenchConfig(**{**base, **kw})


# ---------------------------------------------------------------- model

def test_every_model_flag_value_is_a_preset():
    assert tuple(PRESETS) == MODELS


def test_base_has_bert_base_parameter_count():
    # HF BertForPreTraining(bert-base-uncased) has 110,106,428; padding the vocab 30522 -> 30528
    # adds 6 embedding rows and 6 decoder biases.
    model = BertForPretraining(PRESETS["base"])
    assert sum(p.numel() for p in model.parameters()) == 110_106_428 + 6 * 768 + 6
    assert model.word_embeddings.weight.shape[0] == 30528


def test_flops_formula_matches_the_weights_actually_used():
    cfg = PRESETS["tiny"]
    model = BertForPretraining(cfg)
    encoder = sum(m.weight.numel() for layer in model.layers for m in layer.modules()
                  if isinstance(m, torch.nn.Linear))
    head = model.mlm_transform.weight.numel() + model.word_embeddings.weight.numel()
    lengths, masked = [128, 100, 37], 190
    attention = 6 * cfg.layers * 2 * cfg.hidden * sum(n * n for n in lengths)  # scores and values, per pair
    expected = 6 * encoder * sum(lengths) + 6 * head * masked + attention
    assert training_flops(cfg, sum(lengths), sum(n * n for n in lengths), masked) == expected


def test_from_json_reads_the_reference_bert_config(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({
        "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 4096,
        "max_position_embeddings": 512, "num_attention_heads": 16, "num_hidden_layers": 24,
        "type_vocab_size": 2, "vocab_size": 30522}))
    assert BertConfig.from_json(path) == PRESETS["large"]
    path.write_text(json.dumps({"hidden_size": 100, "num_attention_heads": 12}))
    with pytest.raises(BertdataError, match="not a multiple of 12"):
        BertConfig.from_json(path)
    path.write_text(json.dumps({"hidden_size": "768"}))
    with pytest.raises(BertdataError, match="hidden_size must be int"):
        BertConfig.from_json(path)


def test_mlm_head_runs_on_masked_positions_only_and_equals_full_vocab_loss():
    torch.manual_seed(0)
    cfg = PRESETS["tiny"]
    model = BertForPretraining(cfg).eval()
    b, seq, preds = 4, 32, 5
    ids = torch.randint(0, cfg.vocab_size, (b, seq))
    mask = torch.ones(b, seq, dtype=torch.long)
    mask[1, 20:] = 0
    labels = torch.full((b, seq), -1)
    labels[0, [3, 9, 17]] = torch.tensor([11, 12, 13])
    labels[1, [1, 2, 3, 4, 19]] = torch.tensor([5, 6, 7, 8, 9])
    labels[3, [30]] = 42
    nsp = torch.tensor([0, 1, 1, 0])
    seen = []
    model.mlm_transform.register_forward_hook(lambda m, inp, out: seen.append(inp[0].shape))
    loss = model(Padded(ids, torch.zeros_like(ids), mask, labels, nsp), max_predictions=preds)
    assert seen == [torch.Size([b, preds, cfg.hidden])]  # not [b, seq, hidden]

    with torch.no_grad():
        hidden = model.encode(ids, torch.zeros_like(ids), mask)
        full = model.mlm_logits(hidden)[..., :cfg.vocab_size]  # [b, seq, vocab]: every position, real ids
        mlm = torch.nn.functional.cross_entropy(full.reshape(-1, full.shape[-1]), labels.reshape(-1),
                                                ignore_index=-1)
        nsp_loss = torch.nn.functional.cross_entropy(model.nsp(torch.tanh(model.pooler(hidden[:, 0]))), nsp)
    assert loss.item() == pytest.approx((mlm + nsp_loss).item(), rel=1e-5)


def load_rows(path: Path, n: int) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k][:n] for k in f}


def loss_and_grads(model, batch, **kw) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = model(batch, **kw)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@needs_test_data
@pytest.mark.parametrize("shard", [PARITY_128, PARITY_512], ids=["phase1", "phase2"])
def test_packed_step_equals_padded_step_on_the_reference_shard(shard):
    """Real tokens only, end to end, give the padded layout's loss and gradients (fp32, no dropout)."""
    rows = load_rows(shard, 24)
    width, preds = rows["input_ids"].shape[1], rows["masked_lm_positions"].shape[1]
    assert (rows["input_mask"] == 0).any()  # the shard has padding to take out
    cfg = BertConfig(hidden=64, layers=2, heads=4, intermediate=256, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = BertForPretraining(cfg)
    padded_loss, padded = loss_and_grads(model, to_batch(rows), max_predictions=preds)
    packed = to_packed(rows)
    assert len(packed.input_ids) == int(rows["input_mask"].sum())  # no pad position is computed
    packed_loss, grads = loss_and_grads(model, packed, max_predictions=preds, width=width)
    assert packed_loss == pytest.approx(padded_loss, rel=1e-5)
    assert grads.keys() == padded.keys()
    for name, want in padded.items():
        scale = want.abs().max()
        assert (grads[name] - want).abs().max() <= 1e-5 * scale, name


def test_packed_batch_keeps_every_real_token_and_label_in_order():
    rows = {"input_ids": np.array([[101, 7, 8, 102, 0], [101, 9, 102, 0, 0]], np.int32),
            "segment_ids": np.array([[0, 0, 1, 1, 0], [0, 1, 1, 0, 0]], np.int8),
            "input_mask": np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]], np.int8),
            "masked_lm_positions": np.array([[1, 2], [1, 0]], np.int32),
            "masked_lm_ids": np.array([[70, 80], [90, 0]], np.int32),
            "next_sentence_labels": np.array([1, 0], np.int8)}
    packed = to_packed(rows)
    assert packed.input_ids.tolist() == [101, 7, 8, 102, 101, 9, 102]
    assert packed.segment_ids.tolist() == [0, 0, 1, 1, 0, 1, 1]
    assert packed.positions.tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert packed.cu_seqlens.tolist() == [0, 4, 7] and packed.cu_seqlens.dtype == torch.int32
    assert packed.index.tolist() == [0, 1, 2, 3, 5, 6, 7]
    assert packed.mlm_index.tolist() == [1, 2, 5] and packed.mlm_labels.tolist() == [70, 80, 90]
    counts = figures(packed, 5)
    assert counts == figures(to_batch(rows), 5) == (2, 10, 7, 50, 16 + 9, 3)


# ---------------------------------------------------------------- LAMB

def reference_lamb(params, grads_per_step, lr, wd_flags, betas=(0.9, 0.999), eps=1e-6, wd=0.01,
                   max_norm=1.0):
    """apex FusedLAMB semantics, one parameter at a time in float64."""
    params = [p.double().clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        grads = [g.double() for g in grads]
        norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
        clip = max(norm / max_norm, 1.0)
        for i, (p, g) in enumerate(zip(params, grads)):
            g = g / clip
            m[i] = betas[0] * m[i] + (1 - betas[0]) * g
            v[i] = betas[1] * v[i] + (1 - betas[1]) * g * g
            m_hat = m[i] / (1 - betas[0] ** t)
            v_hat = v[i] / (1 - betas[1] ** t)
            update = m_hat / (v_hat.sqrt() + eps)
            ratio = 1.0
            if wd_flags[i]:
                update = update + wd * p
                w_norm, u_norm = float(p.norm()), float(update.norm())
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            params[i] = p - lr * ratio * update
    return params


def test_lamb_matches_a_per_parameter_reference():
    gen = torch.Generator().manual_seed(3)
    shapes = [(7, 5), (5,), (3, 4, 2), (6,), (4, 4)]
    decay = [True, False, True, False, True]
    init = [torch.randn(s, generator=gen) for s in shapes]
    init[4].zero_()  # zero weight norm: trust ratio falls back to 1
    steps = [[torch.randn(s, generator=gen) * 3 for s in shapes] for _ in range(4)]  # clipped: norm > 1
    params = [torch.nn.Parameter(p.clone()) for p in init]
    opt = Lamb([{"params": [p for p, d in zip(params, decay) if d], "weight_decay": 0.01},
                {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0}], lr=0.05)
    for grads in steps:
        for p, g in zip(params, grads):
            p.grad = g.clone()
        opt.step()
    expected = reference_lamb(init, steps, lr=0.05, wd_flags=decay)
    for got, want in zip(params, expected):
        torch.testing.assert_close(got.detach().double(), want, rtol=1e-5, atol=1e-6)
    assert not torch.equal(params[0].detach(), init[0])


def test_lamb_keeps_gradients_in_one_buffer_and_steps_bert_as_the_reference_does():
    """Backward accumulates into views of the optimizer's one flat buffer, which no step copies or
    replaces; two micro-batches per step, three steps, equal the per-parameter reference."""
    torch.manual_seed(0)
    model = BertForPretraining(PRESETS["tiny"])
    opt = build_optimizer("lamb", model, 1e-2, torch.device("cpu"))
    params = list(model.parameters())
    init = [p.detach().clone() for p in params]
    [flat] = opt._grads
    grads = [p.grad for p in params]
    assert all(p.grad.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr() for p in params)
    gen = torch.Generator().manual_seed(1)
    seen = []
    for _ in range(3):
        for _ in range(2):
            ids = torch.randint(0, PRESETS["tiny"].vocab_size, (4, 32), generator=gen)
            labels = torch.full((4, 32), -1)
            labels[:, [3, 7]] = ids[:, [3, 7]]
            batch = Padded(ids, torch.zeros_like(ids), torch.ones_like(ids), labels, torch.tensor([0, 1, 0, 1]))
            (model(batch, max_predictions=5) / 2).backward()
        seen.append([p.grad.clone() for p in params])
        opt.step()
        opt.zero_grad(set_to_none=True)
        assert all(p.grad is g for p, g in zip(params, grads)) and not flat.any()  # never replaced or copied
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = [not (names[id(p)].endswith("bias") or "norm" in names[id(p)]) for p in params]
    expected = reference_lamb(init, seen, lr=1e-2, wd_flags=decayed)
    for p, want in zip(params, expected):
        torch.testing.assert_close(p.detach().double(), want, rtol=1e-5, atol=1e-6)


def test_no_decay_groups_hold_biases_and_layernorms():
    model = BertForPretraining(PRESETS["tiny"])
    decay, plain = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(names[id(p)].endswith("bias") or "norm" in names[id(p)] for p in plain["params"])
    assert all(p.dim() == 2 for p in decay["params"])
    assert len(decay["params"]) + len(plain["params"]) == len(list(model.parameters()))
    assert isinstance(build_optimizer("adamw", model, 1e-3, torch.device("cpu")), torch.optim.AdamW)


# ---------------------------------------------------------------- data

def test_labels_follow_the_reference_rule():
    positions = np.array([[1, 4, 0, 6], [2, 3, 5, 7], [0, 0, 0, 0]])
    ids = np.array([[10, 40, 99, 60], [20, 30, 50, 70], [1, 2, 3, 4]])
    labels = mlm_labels(positions, ids, 8)
    expected = np.full((3, 8), -1)
    for row in range(3):
        end = list(positions[row]).index(0) if 0 in positions[row] else 4
        expected[row, positions[row, :end]] = ids[row, :end]  # NGC: the list ends at the first 0
    assert (labels == expected).all()
    assert labels[0, 6] == -1  # a position after the terminating 0 is ignored


def test_work_is_divided_exactly_among_ranks_and_workers():
    def rows(units):
        return [(u.path, r) for u in units for r in range(u.start, u.rows, u.stride)]

    for files, world, workers in [(5, 2, 2), (1, 2, 3), (3, 4, 1), (2, 2, 4)]:
        units = [Unit(f"f{i}", 0, 1, 11 + i) for i in range(files)]
        seen = [row for rank in range(world) for w in range(workers)
                for row in rows(divide(divide(units, world, rank), workers, w))]
        assert sorted(seen) == sorted(rows(units))  # every row once, none twice
    assert [u.path for u in divide([Unit(f"f{i}", 0, 1, 3) for i in range(5)], 2, 1)] == ["f1", "f3"]


def test_stream_is_endless_and_batches_span_files(tmp_path):
    write_shard(tmp_path / "a_training.hdf5", 7)
    write_shard(tmp_path / "b_training.hdf5", 3)
    (tmp_path / "notes.hdf5").write_bytes(b"not a training file, ignored")
    infos, reading = survey(tmp_path)
    assert [Path(i.path).name for i in infos] == ["a_training.hdf5", "b_training.hdf5"]
    stream = iter(ShardStream(rank_units(infos, 0, 1), batch_size=4, seed=1, infos=infos, reading=reading))
    batches = [next(stream) for _ in range(5)]  # 20 rows = two passes over the 10
    row_ids = torch.cat([b[0][:, 1] for b in batches]).tolist()
    assert sorted(row_ids) == sorted(list(range(1000, 1007)) * 2 + list(range(1000, 1003)) * 2)
    input_ids, segment_ids, input_mask, labels, nsp = batches[0]
    assert labels.shape == (4, 16) and labels.dtype == torch.int64
    assert (labels[:, [2, 4]] == 7).all() and (labels[:, [0, 1, 3, 5]] == -1).all()
    assert nsp.shape == (4,)


@needs_test_data
def test_labels_on_the_reference_shard(tmp_path):
    infos, reading = survey(training_dir(tmp_path, PARITY_128))
    batch = next(iter(ShardStream(rank_units(infos, 0, 1), batch_size=64, seed=0, infos=infos, reading=reading)))
    labels = batch[3]
    with h5py.File(PARITY_128) as f:
        listed = (f["masked_lm_positions"][()] != 0).sum(1)
    # round(15% of 128) = 19 predictions for a full sequence, fewer for short ones
    counts = (labels != -1).sum(1)
    assert counts.min() >= 1 and counts.max() == listed.max() == 19 and counts.float().mean() > 15
    assert ((labels == -1) | (batch[2] == 1)).all()  # labels only on real tokens


# ---------------------------------------------------------------- training

@needs_test_data
def test_tiny_model_learns_and_throughput_is_counted_over_measured_time(tmp_path):
    data = training_dir(tmp_path, PARITY_128)
    cfg = tiny_cfg(data, batch_size=4, steps=6, warmup_steps=1, lr=2e-2, accumulation=2)
    start = time.perf_counter()
    record = run(cfg)
    wall = time.perf_counter() - start
    losses = record["losses"]
    assert len(losses) == 7
    assert np.mean(losses[-3:]) < losses[0] - 0.1
    assert record["sequences"] == 6 * 2 * 4
    assert record["elapsed_s"] == pytest.approx(sum(record["step_times_s"]))
    assert record["elapsed_s"] < wall
    assert record["sequences_per_second"] == pytest.approx(record["sequences"] / record["elapsed_s"])
    assert record["tokens_per_second"] == pytest.approx(record["sequences_per_second"] * 128)
    assert record["step_time_p50_s"] <= record["step_time_p95_s"]
    assert 0 <= record["loader_wait_share"] < 1
    assert record["global_batch"] == 8 and record["replicas_identical"]
    assert record["masked_tokens"] > 15 * record["sequences"]
    assert record["mfu"] is None  # no known peak for a CPU
    assert report.dllogger_line(record).startswith("training_sequences_per_second : ")


@pytest.mark.slow
@needs_test_data
def test_compiled_step_and_lamb_equal_eager_ones_with_one_graph_for_every_batch(tmp_path):
    """--compile compiles the packed step (one graph for batches of any token count) and LAMB's
    update; without dropout both give the eager run's losses, step after step."""
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "intermediate_size": 256, "hidden_dropout_prob": 0.0,
                                  "attention_probs_dropout_prob": 0.0}))
    data = training_dir(tmp_path, PARITY_128)
    cfg = tiny_cfg(data, bert_config=str(config), batch_size=6, steps=4, warmup_steps=1, lr=2e-2)
    eager = run(cfg)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = run(dataclasses.replace(cfg, compile=True))
    assert compiled["losses"] == pytest.approx(eager["losses"], rel=1e-4)
    assert eager["losses"][-1] < eager["losses"][0]
    assert len({s.real_tokens for s in compiled_batches(cfg)}) > 1  # the batches differ in length
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] <= 3  # the step, its backward, LAMB


def compiled_batches(cfg: BenchConfig) -> list:
    plan = make_plan(cfg)
    stream = iter(ShardStream(rank_units(plan.parts, 0, 1), cfg.batch_size, cfg.seed, plan.parts, plan.reading,
                              packed=True))
    return [figures(next(stream), plan.seq_len) for _ in range(cfg.steps + cfg.warmup_steps)]


@needs_test_data
def test_cli_loader_only_writes_json_and_dllogger_line(tmp_path, capsys):
    data = training_dir(tmp_path, PARITY_128)
    out = tmp_path / "loader.json"
    argv = ["bench", "--data", str(data), "--loader-only", "--device", "cpu", "--batch-size", "32",
            "--steps", "4", "--warmup-steps", "1", "--workers", "2", "--json", str(out)]
    assert cli_main(argv) == 0
    [record] = json.loads(out.read_text())
    assert record["mode"] == "loader" and record["sequences"] == 4 * 32
    assert record["sequences_per_second"] == pytest.approx(record["sequences"] / record["elapsed_s"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("training_sequences_per_second : ")
    assert cli_main(argv) == 2  # the JSON exists now: never overwritten without --force
    assert "already exists" in capsys.readouterr().err


@needs_test_data
def test_matrix_runs_every_cell_and_tabulates_them(tmp_path, capsys):
    data = training_dir(tmp_path, PARITY_128)
    out = tmp_path / "matrix.json"
    assert cli_main(["bench", "--data", str(data), "--model", "tiny", "--device", "cpu", "--matrix",
                     "--batch-size", "2,4", "--precision", "bf16,amp", "--steps", "1",
                     "--warmup-steps", "0", "--workers", "0", "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [(r["batch_size"], r["precision"]) for r in records] == [
        (2, "bf16"), (2, "amp"), (4, "bf16"), (4, "amp")]
    assert all(math.isfinite(r["final_loss"]) for r in records)
    table = capsys.readouterr().out
    assert "| 1 | 158.6 | 639.2 | 873.7 | 1542.3 |" in table
    assert next(line for line in table.splitlines() if line.startswith("| GPUs")).count("(this run)") == 4
    assert table.count("global batch 2 (1 micro-batch of 2 per GPU)") == 2


@pytest.mark.slow
@needs_test_data
def test_gpus_relaunch_under_torchrun_keeps_ddp_replicas_identical(tmp_path, monkeypatch):
    # --gpus 2 re-runs under torchrun; pretending two devices are visible lets the same path
    # run here as two CPU processes (gloo), which is what torchrun gives them without CUDA.
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.chdir(ROOT)
    data = training_dir(tmp_path, PARITY_128)
    out = tmp_path / "ddp.json"
    cfg = tiny_cfg(data, gpus=2, batch_size=4, accumulation=2, steps=3, warmup_steps=0)
    assert execute([cfg], str(out)) == 0
    [record] = json.loads(out.read_text())
    assert record["world"] == 2 and record["global_batch"] == 16 and record["sequences"] == 48
    # Each rank saw different rows; identical weights prove the gradients were all-reduced.
    assert len(record["param_sha256"]) == 2 and record["replicas_identical"]
    assert record["losses"][-1] < record["losses"][0]


# ---------------------------------------------------------------- bad input, before any work

def test_no_shards(tmp_path):
    (tmp_path / "validation_0.hdf5").write_bytes(b"")
    with pytest.raises(BertdataError, match="no shards"):
        make_plan(tiny_cfg(tmp_path))
    with pytest.raises(BertdataError, match="must be a folder"):
        make_plan(tiny_cfg(tmp_path / "missing"))


def test_unreadable_and_mixed_shards(tmp_path):
    (tmp_path / "x_training.hdf5").write_bytes(b"garbage")
    with pytest.raises(BertdataError, match="x_training.hdf5: not a readable hdf5 file"):
        make_plan(tiny_cfg(tmp_path))
    os.remove(tmp_path / "x_training.hdf5")
    write_shard(tmp_path / "a_training.hdf5", 4, seq_len=16)
    write_shard(tmp_path / "b_training.hdf5", 4, seq_len=32)
    with pytest.raises(BertdataError, match="one phase per folder"):
        make_plan(tiny_cfg(tmp_path))


@needs_test_data
def test_sequence_longer_than_the_model(tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({"hidden_size": 128, "num_attention_heads": 2, "num_hidden_layers": 2,
                                  "intermediate_size": 512, "max_position_embeddings": 256}))
    data = training_dir(tmp_path, PARITY_512)
    with pytest.raises(BertdataError, match="sequence length 512 exceeds the model's max_position 256"):
        make_plan(tiny_cfg(data, bert_config=str(config)))


def test_batch_size_must_divide_global_batch(tmp_path):
    write_shard(tmp_path / "a_training.hdf5", 40)
    with pytest.raises(BertdataError, match="does not divide --global-batch 100"):
        make_plan(tiny_cfg(tmp_path, batch_size=8, global_batch=100))
    assert make_plan(tiny_cfg(tmp_path, batch_size=8, global_batch=96)).accumulation == 12
    with pytest.raises(BertdataError, match="not both"):
        tiny_cfg(tmp_path, global_batch=96, accumulation=2)


def test_every_rank_needs_rows(tmp_path):
    write_shard(tmp_path / "a_training.hdf5", 3)
    assert make_plan(tiny_cfg(tmp_path, batch_size=1), world=3).world == 3
    with pytest.raises(BertdataError, match="3 instances cannot feed 4 ranks"):
        make_plan(tiny_cfg(tmp_path, batch_size=1), world=4)


def test_a_batch_larger_than_the_data_set_is_refused(tmp_path):
    write_shard(tmp_path / "a_training.hdf5", 40)
    assert make_plan(tiny_cfg(tmp_path, batch_size=40)).world == 1
    with pytest.raises(BertdataError, match="--batch-size 41 is more than the 40 instances in .*: every batch "
                                            "would hold some of them twice"):
        make_plan(tiny_cfg(tmp_path, batch_size=41))
    with pytest.raises(BertdataError, match="--batch-size 16 x 3 ranks = 48 is more than the 40 instances"):
        make_plan(tiny_cfg(tmp_path, batch_size=16), world=3)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the errors of a machine without CUDA")
def test_cuda_absent_and_too_many_gpus(tmp_path, capsys):
    write_shard(tmp_path / "a_training.hdf5", 40)
    with pytest.raises(BertdataError, match="--device cuda but CUDA is not available"):
        make_plan(tiny_cfg(tmp_path, device="cuda"))
    with pytest.raises(BertdataError, match="--gpus 2 but only 0 CUDA device"):
        execute([tiny_cfg(tmp_path, gpus=2)])
    assert cli_main(["bench", "--data", str(tmp_path), "--gpus", "2"]) == 2
    assert "bertdata bench: error: --gpus 2 but only 0" in capsys.readouterr().err


def test_cli_leaves_defaults_to_bench_config_and_its_help_states_them():
    import argparse
    import dataclasses

    from bertdata.cli import build_parser
    from bertdata.commands.bench import configs_from_args

    parser = build_parser()
    assert configs_from_args(parser.parse_args(["bench", "--data", "d"]), BenchConfig) == [BenchConfig(data="d")]
    matrix = configs_from_args(parser.parse_args(["bench", "--data", "d", "--matrix", "--seed", "7"]), BenchConfig)
    assert [(c.batch_size, c.precision, c.seed) for c in matrix] == [
        (b, p, 7) for b in (96, 128) for p in ("fp32", "tf32", "amp", "bf16")]
    bench = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    helps = {action.dest: action.help for action in bench._actions}
    stated = [f for f in dataclasses.fields(BenchConfig) if f.default not in (dataclasses.MISSING, None, False)]
    assert {f.name for f in stated} == {"model", "batch_size", "steps", "warmup_steps", "gpus", "lr", "optimizer",
                                        "seed"}
    for f in stated:
        assert f"(default: {f.default}" in helps[f.name], (f.name, helps[f.name])


def test_missing_torch_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    assert cli_main(["bench", "--data", str(tmp_path)]) == 2
    assert "pip install 'bertdata[bench]'" in capsys.readouterr().err


# ---------------------------------------------------------------- report

def test_report_mfu_and_table_for_a_gpu_record():
    raw = dict(mode="train", model="base", device_type="cuda", device_name="NVIDIA A100-SXM4-80GB",
               world=8, precision="amp", batch_size=128, accumulation=66, global_batch=67584, seq_len=128,
               sequences=2000, tokens=2000 * 128, real_tokens=2000 * 100, step_times_s=[0.5, 0.5, 1.0],
               loader_wait_s=[0.1, 0.0, 0.0], flops=8 * 312e12 * 2.0 * 0.5)
    record = report.summarize(raw)
    assert record["sequences_per_second"] == 1000.0
    assert record["loader_wait_share"] == pytest.approx(0.05)
    assert record["peak_tflops"] == 312.0 and record["mfu"] == pytest.approx(0.5)
    assert report.peak_tflops("NVIDIA H200", "bf16") == 989.4
    assert report.peak_tflops("NVIDIA H100 PCIe", "tf32") == 378.0
    assert report.peak_tflops("Tesla V100-SXM2-16GB", "bf16") is None
    table = report.markdown_table([record])
    assert "| 8 | 1232.1 | 5055.6 | 6846.0 | 12075.6 | 1000.0 |" in table
    assert ("global batch 67584 (66 micro-batches of 128 per GPU); MFU 50.0% on real tokens; 0.20x V100 AMP bs96, "
            "0.08x A100 AMP bs128 at 8 GPU(s)") in table


# ---------------------------------------------------------------- hostile and careless input

@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("field, index, value, reason", [
    ("input_ids", (3, 2), 40000, "instance 3: token id >= vocab size 30522"),
    ("masked_lm_positions", (5, 1), 16, "instance 5: masked position outside the real tokens"),
    ("masked_lm_positions", (5, 1), 15, "instance 5: masked position outside the real tokens"),
])
def test_out_of_range_rows_stop_training_with_one_line(tmp_path, capsys, field, index, value, reason, workers):
    path = tmp_path / "x_training_0.hdf5"
    write_shard(path, 8)
    with h5py.File(path, "r+") as f:
        if reason.endswith("real tokens"):
            f["input_mask"][5, 12:] = 0
            f["input_ids"][5, 12:] = 0
        f[field][index] = value
    argv = ["bench", "--data", str(tmp_path), "--model", "tiny", "--device", "cpu", "--batch-size", "4",
            "--steps", "2", "--warmup-steps", "1", "--workers", str(workers)]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"bertdata bench: error: invalid shard: {path}: {reason}"), err


def test_hostile_layouts_are_refused_before_training(tmp_path):
    for name, (path, reason) in hostile_files(tmp_path).items():
        folder = tmp_path / name
        folder.mkdir()
        path.rename(folder / path.name)
        with pytest.raises(BertdataError, match=f"invalid shard: {folder / path.name}: "):
            make_plan(tiny_cfg(folder))


def test_default_workers_fit_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert BenchConfig(data=str(tmp_path)).workers == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert BenchConfig(data=str(tmp_path)).workers == 4


# ---------------------------------------------------------------- cold start kept out of the timed steps

def _small_shard(tmp_path: Path) -> Path:
    path = tmp_path / "small.hdf5"
    write_shard(path, 16)
    return path


def test_warm_up_lasts_until_one_time_work_is_done():
    from bertdata.benchmark.train import WarmUp

    rule = WarmUp(steps=1, extra=5)
    # The one-time work is done after 4 steps: those 4 are the warm-up, not the 1 asked for.
    taken = 0
    while not rule.over(taken, done=taken >= 4):
        taken += 1
    assert taken == 4
    assert not rule.over(0, done=True)  # the steps asked for first, done or not
    # At most `extra` steps more: work that never reports done does not hold the run up for ever.
    assert not rule.over(5, done=False) and rule.over(6, done=False)


def test_first_optimizer_step_and_first_batch_of_each_worker_are_never_timed(tmp_path):
    data = training_dir(tmp_path, _small_shard(tmp_path))
    # The first step allocates the optimizer's state: not timed even when no warm-up is asked for.
    record = run(tiny_cfg(data, warmup_steps=0, steps=2))
    assert record["warmup_steps"] == 1 and len(record["step_times_s"]) == 2
    # Each worker reads a whole file before its first batch: one batch per worker before timing.
    record = run(tiny_cfg(data, warmup_steps=0, steps=2, workers=2, batch_size=2, loader_only=True))
    assert record["warmup_steps"] == 2 and len(record["step_times_s"]) == 2


def test_a_cpu_batch_that_cannot_fit_in_memory_is_refused_before_allocating(tmp_path, monkeypatch, capsys):
    import bertdata.benchmark.train as train_module
    from bertdata.benchmark.model import training_bytes

    write_shard(tmp_path / "a_training.hdf5", 1000, seq_len=128, preds=20)
    available = train_module.available_memory()
    assert available is not None and available > 0  # Linux: /proc/meminfo
    # BERT-base at seq 128 keeps about 0.1 GB per sequence for the backward pass: 1000 cannot fit.
    assert cli_main(["bench", "--data", str(tmp_path), "--model", "base", "--device", "cpu", "--batch-size", "1000",
                     "--workers", "0"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    counted = training_bytes(train_module.BertConfig.preset("base"), 1000, 128, 20)
    fixed, per_sequence = (int(train_module.MEMORY_SCALE * n) for n in counted)
    fits = (available - fixed) // per_sequence
    assert line.startswith("bertdata bench: error: --batch-size 1000 needs about ")
    assert "to train BERT-base at sequence length 128 on CPU, more than the " in line
    # The advice is a batch that fits (give or take what other processes did meanwhile).
    advised = int(line.split("try --batch-size ")[1].split()[0])
    assert 1 <= advised and abs(advised - fits) <= max(2, fits // 10)
    monkeypatch.setattr(train_module, "available_memory", lambda: fixed // 2)
    with pytest.raises(BertdataError, match="the model alone needs 2.2 GB: choose a smaller --model"):
        make_plan(tiny_cfg(tmp_path, model="base", batch_size=1))
    monkeypatch.setattr(train_module, "available_memory", lambda: fixed + 8 * per_sequence)
    assert make_plan(tiny_cfg(tmp_path, model="base", batch_size=8)).world == 1


def test_the_memory_count_holds_the_models_parameters():
    from bertdata.benchmark.model import training_bytes

    for name in ("tiny", "base"):
        params = sum(p.numel() for p in BertForPretraining(BertConfig.preset(name)).parameters())
        assert training_bytes(BertConfig.preset(name), 1, 128, 20)[0] == pytest.approx(16 * params, rel=0.01)


@pytest.mark.parametrize("kind", ["MemoryError", "OutOfMemoryError"])
def test_out_of_memory_while_training_is_one_line_naming_the_batch(tmp_path, monkeypatch, kind):
    import bertdata.benchmark.train as train_module

    write_shard(tmp_path / "a_training.hdf5", 40)

    def out_of_memory(cfg, plan):
        if kind == "MemoryError":
            np.empty(1 << 62, dtype=np.uint8)  # numpy's own MemoryError, as a loader's allocation raises it
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(train_module, "train", out_of_memory)
    with pytest.raises(BertdataError) as caught:
        run(tiny_cfg(tmp_path, batch_size=8, accumulation=2))
    assert str(caught.value) == ("out of memory on cpu with --batch-size 8 (BERT-tiny, sequence length 16, fp32): try "
                                 "--batch-size 4, with --accumulation 4 to keep the global batch of 16")


# ---------------------------------------------------------------- a reference nobody here wrote

def hf_names(layers: int) -> dict[str, tuple[str, slice | None]]:
    """Hugging Face BertForPreTraining's parameter -> (the bench model's parameter, the rows of it
    that hold it; None: all). Q, K and V are the bench's one qkv matrix in that order; the bench
    pads the vocab to a multiple of 8, HF's holds the real ids only."""
    names = {
        "bert.embeddings.position_embeddings.weight": "position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight": "token_type_embeddings.weight",
        "bert.embeddings.LayerNorm.weight": "embedding_norm.weight",
        "bert.embeddings.LayerNorm.bias": "embedding_norm.bias",
        "bert.pooler.dense.weight": "pooler.weight", "bert.pooler.dense.bias": "pooler.bias",
        "cls.predictions.transform.dense.weight": "mlm_transform.weight",
        "cls.predictions.transform.dense.bias": "mlm_transform.bias",
        "cls.predictions.transform.LayerNorm.weight": "mlm_norm.weight",
        "cls.predictions.transform.LayerNorm.bias": "mlm_norm.bias",
        "cls.seq_relationship.weight": "nsp.weight", "cls.seq_relationship.bias": "nsp.bias",
    }
    for i in range(layers):
        hf, ours = f"bert.encoder.layer.{i}.", f"layers.{i}."
        names.update({
            hf + "attention.output.dense.weight": ours + "attention.out.weight",
            hf + "attention.output.dense.bias": ours + "attention.out.bias",
            hf + "attention.output.LayerNorm.weight": ours + "attention_norm.weight",
            hf + "attention.output.LayerNorm.bias": ours + "attention_norm.bias",
            hf + "intermediate.dense.weight": ours + "up.weight", hf + "intermediate.dense.bias": ours + "up.bias",
            hf + "output.dense.weight": ours + "down.weight", hf + "output.dense.bias": ours + "down.bias",
            hf + "output.LayerNorm.weight": ours + "output_norm.weight",
            hf + "output.LayerNorm.bias": ours + "output_norm.bias",
        })
    mapped = {hf: (ours, None) for hf, ours in names.items()}
    for i in range(layers):
        for j, part in enumerate(("query", "key", "value")):
            for kind in ("weight", "bias"):
                mapped[f"bert.encoder.layer.{i}.attention.self.{part}.{kind}"] = (f"layers.{i}.attention.qkv.{kind}", j)
    mapped["bert.embeddings.word_embeddings.weight"] = ("word_embeddings.weight", "vocab")
    mapped["cls.predictions.bias"] = ("mlm_bias", "vocab")
    return mapped


def hf_part(tensor: torch.Tensor, rows, cfg: BertConfig) -> torch.Tensor:
    if rows is None:
        return tensor
    if rows == "vocab":
        return tensor[:cfg.vocab_size]
    return tensor.chunk(3)[rows]


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


@needs_test_data
@pytest.mark.parametrize("shard, rows", [(PARITY_128, 24), (PARITY_512, 8)], ids=["phase1", "phase2"])
def test_padded_and_packed_steps_equal_hugging_faces_bert(shard, rows):
    """Hugging Face's BertForPreTraining with the bench model's weights copied in gives, in fp32
    with dropout off, the loss and every parameter's gradient of both of the bench's layouts."""
    transformers = pytest.importorskip("transformers", reason="transformers (the megatron extra) is not installed")
    batch = load_rows(shard, rows)
    width, preds = batch["input_ids"].shape[1], batch["masked_lm_positions"].shape[1]
    cfg = BertConfig(hidden=64, layers=2, heads=4, intermediate=256, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    ours = BertForPretraining(cfg)
    with torch.no_grad():  # nonzero biases and LayerNorm weights, so that a swapped one shows
        for name, p in ours.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    hf = transformers.BertForPreTraining(transformers.BertConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate, max_position_embeddings=cfg.max_position,
        type_vocab_size=cfg.type_vocab, hidden_act=cfg.activation, layer_norm_eps=cfg.layer_norm_eps,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")).eval()
    mapping = hf_names(cfg.layers)
    params = dict(ours.named_parameters())
    hf_params = dict(hf.named_parameters())
    assert mapping.keys() == hf_params.keys()
    assert {name for name, _ in mapping.values()} == params.keys()
    with torch.no_grad():
        for name, (mine, rows_of) in mapping.items():
            hf_params[name].copy_(hf_part(params[mine], rows_of, cfg))
    assert hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight  # tied, as ours

    padded = to_batch(batch)
    input_ids, segment_ids, input_mask, labels, nsp = padded
    hf.zero_grad(set_to_none=True)
    out = hf(input_ids=input_ids, token_type_ids=segment_ids, attention_mask=input_mask,
             labels=labels.masked_fill(labels == -1, -100), next_sentence_label=nsp)
    out.loss.backward()
    want_loss = out.loss.item()
    for layout, (loss, grads) in {
        "padded": loss_and_grads(ours.eval(), padded, max_predictions=preds),
        "packed": loss_and_grads(ours.eval(), to_packed(batch), max_predictions=preds, width=width),
    }.items():
        assert loss == pytest.approx(want_loss, rel=1e-6), layout
        for name, (mine, rows_of) in mapping.items():
            got, want = hf_part(grads[mine], rows_of, cfg), hf_params[name].grad
            if name.endswith("key.bias"):
                # A shift every key of a query shares leaves its softmax as it was: the true gradient
                # is 0, and both sides hold rounding only, small beside the query bias's.
                scale = hf_params[name.replace("key", "query")].grad.norm()
                assert got.norm() <= 1e-5 * scale and want.norm() <= 1e-5 * scale, (layout, name)
                continue
            assert relative_error(got, want) <= 1e-5, (layout, name)
        # The vocab's padding rows are no token: nothing reaches them.
        assert not grads["word_embeddings.weight"][cfg.vocab_size:].any() and not grads["mlm_bias"][cfg.vocab_size:].any()


# ---------------------------------------------------------------- the GPU check's parity, on CPU

@needs_test_data
def test_parity_check_passes_and_fails_where_one_small_parameter_is_wrong(tmp_path, monkeypatch, capsys):
    from bertdata.benchmark import parity

    phases = []
    for name, shard in (("phase1", PARITY_128), ("phase2", PARITY_512)):
        (tmp_path / name).mkdir()
        phases.append(training_dir(tmp_path / name, shard))
    cfg = PRESETS["tiny"]
    for folder in phases:
        assert parity.check(str(folder), torch.device("cpu"), cfg, "fp32", False, 8) == []
    assert "dropout on, 8 draws" in capsys.readouterr().out
    right = parity.forward

    def nsp_bias_gradient_off(net, batch, *args):
        # The loss as it was; the NSP bias's gradient, a parameter of two numbers, 0.5 too large.
        loss = right(net, batch, *args)
        if isinstance(batch, parity.Packed):
            bias = net.nsp.bias.sum()
            loss = loss + 0.5 * (bias - bias.detach())
        return loss

    monkeypatch.setattr(parity, "forward", nsp_bias_gradient_off)
    failures = parity.check(str(phases[0]), torch.device("cpu"), cfg, "fp32", False, 8)
    assert [line.split(":")[0] for line in failures] == ["nsp.bias"]

    def no_dropout_when_packed(net, batch, *args):
        was = net.training
        net.train(was and not isinstance(batch, parity.Packed))
        try:
            return right(net, batch, *args)
        finally:
            net.train(was)

    monkeypatch.setattr(parity, "forward", no_dropout_when_packed)
    failures = parity.check(str(phases[0]), torch.device("cpu"), cfg, "fp32", False, 8)
    assert any("spread" in line for line in failures), failures


# ---------------------------------------------------------------- token buckets (CUDA graphs), on CPU

@needs_test_data
@pytest.mark.parametrize("shard", [PARITY_128, PARITY_512], ids=["phase1", "phase2"])
def test_a_buckets_dummy_rows_change_neither_the_loss_nor_the_gradients(shard):
    rows = load_rows(shard, 12)
    width, preds = rows["input_ids"].shape[1], rows["masked_lm_positions"].shape[1]
    plain, bucketed = to_packed(rows), to_packed(rows, buckets=3)
    tokens, extra = bucket_size(12, width, 3, len(plain.input_ids))
    assert len(bucketed.input_ids) == tokens > len(plain.input_ids)
    assert len(bucketed.cu_seqlens) == 12 + extra + 1 and len(bucketed.mlm_labels) == 12 * preds
    lengths = (bucketed.cu_seqlens[1:] - bucketed.cu_seqlens[:-1]).tolist()
    assert lengths[:12] == (plain.cu_seqlens[1:] - plain.cu_seqlens[:-1]).tolist()
    assert all(0 <= n <= width for n in lengths[12:]) and lengths[-1] == 0  # dummies, then rows of no tokens
    assert figures(bucketed, width) == figures(plain, width)
    cfg = BertConfig(hidden=64, layers=2, heads=4, intermediate=256, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = BertForPretraining(cfg)
    want_loss, want = loss_and_grads(model, plain, max_predictions=preds, width=width)
    loss, grads = loss_and_grads(model, bucketed, max_predictions=preds, width=width)
    assert loss == pytest.approx(want_loss, rel=1e-6)
    for name, g in want.items():
        assert float((grads[name] - g).norm()) <= 1e-5 * float(g.norm()) + 1e-12, name


@needs_test_data
def test_a_run_with_token_buckets_sees_that_many_shapes_at_most(tmp_path):
    data = training_dir(tmp_path, PARITY_128)
    cfg = tiny_cfg(data, batch_size=4, steps=6, warmup_steps=1)
    assert run(cfg)["batch_shapes"] > 2  # every batch another token count
    record = run(dataclasses.replace(cfg, token_buckets=2))
    assert record["batch_shapes"] <= 2 and record["token_buckets"] == 2
    with pytest.raises(BertdataError, match="--token-buckets rounds packed batches up"):
        dataclasses.replace(cfg, token_buckets=2, padded=True)
