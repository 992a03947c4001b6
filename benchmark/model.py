"""BERT for pretraining (masked LM + next sentence, or masked LM alone), in one file.

Post-LayerNorm encoder as in the original BERT and the NGC recipe. The MLM head runs only
on the masked positions: over a 30k vocab it is the largest matmul per token, and only
~15% of tokens carry a label.

Two layouts of a batch run through the same weights:
- padded ([B, L], the shards' own): attention through `scaled_dot_product_attention` with a
  key mask, and every pad position computed by every dense layer;
- packed (`Packed`: the real tokens of all rows end to end, [T]): the dense layers see real
  tokens only, and attention runs per row on them -- flash attention's variable-length kernel
  on CUDA in 16 bits, elsewhere the rows scattered back to [B, L] around a masked SDPA. Real
  data is 8% padding in phase 1 and 21% in phase 2, all of it work the packed layout skips.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from bertdata.errors import BertdataError
from bertdata.fsutil import load_json

ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}

# Reference `bert_config.json` key -> our field.
_JSON_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden",
    "num_hidden_layers": "layers",
    "num_attention_heads": "heads",
    "intermediate_size": "intermediate",
    "max_position_embeddings": "max_position",
    "type_vocab_size": "type_vocab",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "hidden_act": "activation",
    "initializer_range": "initializer_range",
    "layer_norm_eps": "layer_norm_eps",
}


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    max_position: int = 512
    type_vocab: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise BertdataError(f"hidden size {self.hidden} is not a multiple of {self.heads} attention heads")
        if self.activation not in ACTIVATIONS:
            raise BertdataError(f"hidden_act {self.activation!r} is not one of {', '.join(ACTIVATIONS)}")

    @property
    def padded_vocab(self) -> int:
        # Tensor cores want matmul dimensions in multiples of 8 (NGC pads 30522 -> 30528).
        return math.ceil(self.vocab_size / 8) * 8

    @classmethod
    def preset(cls, name: str) -> BertConfig:
        if name not in PRESETS:
            raise BertdataError(f"unknown model {name!r}; choose one of {', '.join(PRESETS)}")
        return PRESETS[name]

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        """Read the reference `bert_config.json`; keys it lacks keep BERT-base defaults."""
        try:
            raw = load_json(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise BertdataError(f"{path}: cannot read BERT config: {err}") from None
        if not isinstance(raw, dict):
            raise BertdataError(f"{path}: a BERT config must be a JSON object")
        types = {f.name: f.type for f in fields(cls)}
        values = {}
        for key, name in _JSON_KEYS.items():
            if key in raw:
                value = raw[key]
                expected = {"int": int, "float": (int, float), "str": str}[types[name]]
                if not isinstance(value, expected) or isinstance(value, bool):
                    raise BertdataError(f"{path}: {key} must be {types[name]}, got {value!r}")
                values[name] = float(value) if types[name] == "float" else value
        try:
            return cls(**values)
        except BertdataError as err:
            raise BertdataError(f"{path}: {err}") from None


PRESETS = {
    "base": BertConfig(),
    "large": BertConfig(hidden=1024, layers=24, heads=16, intermediate=4096),
    "tiny": BertConfig(hidden=128, layers=2, heads=2, intermediate=512),
}


class Padded(NamedTuple):
    """A batch in the shards' own layout: every row `width` long, pads included."""

    input_ids: torch.Tensor  # [B, L]
    segment_ids: torch.Tensor  # [B, L]
    input_mask: torch.Tensor  # [B, L]: 1 on real tokens, then 0s
    labels: torch.Tensor  # [B, L]: -1 except at the masked positions, which hold the original ids
    nsp_labels: torch.Tensor  # [B]


class Packed(NamedTuple):
    """A batch with its padding taken out: row i's real tokens are [cu_seqlens[i], cu_seqlens[i + 1])."""

    input_ids: torch.Tensor  # [T]
    segment_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]: each token's place in its row
    cu_seqlens: torch.Tensor  # [B + 1] int32
    index: torch.Tensor  # [T]: each token's place in the [B x L] padded layout
    mlm_index: torch.Tensor  # [M]: where in [T] the masked tokens are
    mlm_labels: torch.Tensor  # [M]: their original ids
    nsp_labels: torch.Tensor  # [B]


def packed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                     index: torch.Tensor, width: int, dropout_p: float) -> torch.Tensor:
    """Attention of each row's tokens to its own tokens, on packed [T, heads, head_dim] inputs.

    `width` (the shards' sequence length, a bound on every row's) stays the same from batch to
    batch, so a compiled graph never specializes on the longest row of a batch."""
    if q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        return torch.ops.aten._flash_attention_forward(
            q, k, v, cu_seqlens, cu_seqlens, width, width, dropout_p, False, False)[0]
    # fp32 and CPU: flash attention has no kernel for them, so the rows go back to [B, L] here.
    rows, (_, heads, dim) = cu_seqlens.shape[0] - 1, q.shape
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    # Key 0 kept in every row: a bucket's rows of no tokens (see data.to_packed) would otherwise
    # have no key at all, and a softmax over none is NaN, in the backward too. No token reads them.
    cols = torch.arange(width, device=q.device)
    keep = ((cols < lengths[:, None]) | (cols == 0))[:, None, None, :]

    def padded(x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(rows * width, heads, dim).index_copy(0, index, x)
        return out.view(rows, width, heads, dim).transpose(1, 2)

    y = F.scaled_dot_product_attention(padded(q), padded(k), padded(v), attn_mask=keep, dropout_p=dropout_p)
    return y.transpose(1, 2).reshape(rows * width, heads, dim).index_select(0, index)


class SelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)  # one matmul for Q, K and V
        self.out = nn.Linear(cfg.hidden, cfg.hidden)
        self.dropout_p = cfg.attention_dropout

    def forward(self, x: torch.Tensor, keep: torch.Tensor | Packed, width: int) -> torch.Tensor:
        dropout_p = self.dropout_p if self.training else 0.0
        h = x.shape[-1]
        if isinstance(keep, Packed):  # x: [T, hidden]
            q, k, v = self.qkv(x).view(-1, 3, self.heads, h // self.heads).unbind(1)
            y = packed_attention(q, k, v, keep.cu_seqlens, keep.index, width, dropout_p)
            return self.out(y.reshape(-1, h))
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=dropout_p)
        return self.out(y.transpose(1, 2).reshape(b, n, h))


class Layer(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.up = nn.Linear(cfg.hidden, cfg.intermediate)
        self.down = nn.Linear(cfg.intermediate, cfg.hidden)
        self.output_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        self.act = ACTIVATIONS[cfg.activation]
        self.activations: torch.dtype | None = None

    def forward(self, x: torch.Tensor, keep: torch.Tensor | Packed, width: int) -> torch.Tensor:
        x = kept_in(self.attention_norm(x + self.dropout(self.attention(x, keep, width))), self.activations)
        return kept_in(self.output_norm(x + self.dropout(self.down(self.act(self.up(x))))), self.activations)


def kept_in(x: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return x if dtype is None else x.to(dtype)


class BertForPretraining(nn.Module):
    """`nsp`: with the next-sentence head (BERT's objective); without it the loss is the masked
    LM's alone (today's encoders': RoBERTa, MosaicBERT, ModernBERT), and the model has no pooler."""

    def __init__(self, cfg: BertConfig, nsp: bool = True):
        super().__init__()
        self.cfg = cfg
        self.with_nsp = nsp
        self.word_embeddings = nn.Embedding(cfg.padded_vocab, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab, cfg.hidden)
        self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        if nsp:
            self.pooler = nn.Linear(cfg.hidden, cfg.hidden)
            self.nsp = nn.Linear(cfg.hidden, 2)
        self.mlm_transform = nn.Linear(cfg.hidden, cfg.hidden)
        self.mlm_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        # The decoder weight IS the word embedding matrix (tied); only its bias is separate.
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.padded_vocab))
        self.act = ACTIVATIONS[cfg.activation]
        self.activations: torch.dtype | None = None
        self.apply(self._init)

    def keep_activations_in(self, dtype: torch.dtype | None) -> None:
        """Under autocast, LayerNorm runs in fp32 and hands fp32 on: the residual stream would be
        read and written at twice the width of every matmul's input. With `dtype` (autocast's),
        each LayerNorm's output is cast back to it, as apex's fused LayerNorm returns half
        precision under NGC's AMP; None keeps what autocast gives."""
        self.activations = dtype
        for layer in self.layers:
            layer.activations = dtype

    def _init(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.cfg.initializer_range)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    def encode(self, input_ids: torch.Tensor, segment_ids: torch.Tensor,
               input_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions) \
            + self.token_type_embeddings(segment_ids)
        keep = input_mask.bool()[:, None, None, :]  # [B, 1, 1, L]: which keys a query may attend to
        return self._layers(x, keep, input_ids.shape[1])

    def _layers(self, x: torch.Tensor, keep: torch.Tensor | Packed, width: int) -> torch.Tensor:
        x = self.dropout(kept_in(self.embedding_norm(x), self.activations))
        for layer in self.layers:
            x = layer(x, keep, width)
        return x

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.mlm_norm(self.act(self.mlm_transform(hidden)))
        return F.linear(h, self.word_embeddings.weight, self.mlm_bias)

    def forward(self, batch: Padded | Packed, max_predictions: int, width: int | None = None) -> torch.Tensor:
        """Total pretraining loss of a `Padded` batch, or of a `Packed` one whose rows the shards
        padded to `width`.

        `max_predictions` (the shards' P) bounds the masked positions per sequence, so the
        padded layout's gather has a static shape [B, P] -- no host sync, and torch.compile
        sees one graph.
        """
        if isinstance(batch, Packed):
            return self._packed_loss(batch, width)
        input_ids, segment_ids, input_mask, labels, nsp_labels = batch
        x = self.encode(input_ids, segment_ids, input_mask)
        k = min(max_predictions, labels.shape[1])
        # A stable sort puts each row's masked positions first, in order; slots past a row's
        # count pick unmasked positions whose label -1 is ignored by the loss.
        order = torch.sort((labels != -1).to(torch.int32), dim=1, descending=True, stable=True).indices[:, :k]
        picked = torch.gather(x, 1, order[:, :, None].expand(-1, -1, x.shape[2]))
        return self._loss(x[:, 0], picked, torch.gather(labels, 1, order), nsp_labels)

    def _packed_loss(self, batch: Packed, width: int) -> torch.Tensor:
        x = self.word_embeddings(batch.input_ids) + self.position_embeddings(batch.positions) \
            + self.token_type_embeddings(batch.segment_ids)
        x = self._layers(x, batch, width)
        # NSP from the real rows' first tokens: rows past them are a bucket's dummies (see data.to_packed).
        first = x[batch.cu_seqlens[:len(batch.nsp_labels)]] if self.with_nsp else x[:0]
        return self._loss(first, x[batch.mlm_index], batch.mlm_labels, batch.nsp_labels)

    def _loss(self, first: torch.Tensor, picked: torch.Tensor, labels: torch.Tensor,
              nsp_labels: torch.Tensor) -> torch.Tensor:
        """MLM loss of the `picked` tokens' states (label -1: none) + NSP loss from each row's first."""
        # The decoder's matmul runs over the padded vocab (tensor cores want a multiple of 8), but
        # the padding's columns are no token: in the softmax they would be classes BERT does not
        # have, and the loss would differ from BERT's (and Hugging Face's) with the same weights.
        mlm_logits = self.mlm_logits(picked)[..., :self.cfg.vocab_size]
        mlm_loss = F.cross_entropy(mlm_logits.reshape(-1, self.cfg.vocab_size).float(), labels.reshape(-1),
                                   ignore_index=-1)
        if not self.with_nsp:
            return mlm_loss
        nsp_logits = self.nsp(torch.tanh(self.pooler(first)))
        return mlm_loss + F.cross_entropy(nsp_logits.float(), nsp_labels.reshape(-1))


def training_bytes(cfg: BertConfig, batch: int, seq_len: int, max_predictions: int) -> tuple[int, int]:
    """Memory to train in fp32, as (fixed, per sequence) bytes: weights, gradients and the two
    optimizer moments (16 bytes a parameter), then what the backward pass keeps per sequence --
    per layer and token about twice Megatron-LM's 16-bit count (Korthikanti et al. 2022: 34h +
    5as bytes, for an intermediate size of 4h), plus the MLM head's logits and their gradient
    over the padded vocab. An estimate, to refuse a batch that cannot fit before allocating it."""
    h, i, n = cfg.hidden, cfg.intermediate, cfg.layers
    params = ((cfg.padded_vocab + cfg.max_position + cfg.type_vocab) * h + n * (4 * h * h + 2 * h * i + 9 * h + i)
              + 2 * h * h + cfg.padded_vocab)
    per_token_layer = 2 * (18 * h + 4 * i) + 10 * cfg.heads * seq_len
    per_sequence = n * seq_len * per_token_layer + 3 * 4 * max_predictions * cfg.padded_vocab + 16 * seq_len * h
    return 16 * params, per_sequence


def training_flops(cfg: BertConfig, tokens: float, pairs: float, masked_tokens: float) -> float:
    """Training FLOPs (forward + backward = 3x forward) of `tokens` run through the encoder,
    `pairs` the sum over its sequences of their length squared (the query-key pairs attention
    scores), and the MLM head on `masked_tokens`.

    6 x (weights used per token) x tokens for the encoder's dense layers, plus the attention
    score and value products (2 x 2 x hidden per pair per layer, forward), and the MLM head only
    on the masked tokens it actually runs on. Embedding lookups, LayerNorm, softmax and the
    pooler/NSP head are left out (under 1% for BERT-base). Counted on real tokens, this is the
    work a batch needs; counted on padded rows (every row's length the shards' width), the work
    the padded layout does.
    """
    h, n = cfg.hidden, cfg.layers
    dense = n * (4 * h * h + 2 * h * cfg.intermediate)
    head = h * h + h * cfg.padded_vocab
    return 6.0 * (tokens * dense + masked_tokens * head + pairs * n * 2 * h)
