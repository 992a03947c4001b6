"""BERT for pretraining (masked LM + next sentence), in one file.

Post-LayerNorm encoder as in the original BERT and the NGC recipe; attention through
`scaled_dot_product_attention` so PyTorch picks a fused kernel. The MLM head runs only
on the masked positions: over a 30k vocab it is the largest matmul per token, and only
~15% of tokens carry a label.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bertdata.errors import BertdataError

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
            raw = json.loads(Path(path).read_text())
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


class SelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.hidden)
        self.dropout_p = cfg.attention_dropout

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        b, n, h = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep,
                                           dropout_p=self.dropout_p if self.training else 0.0)
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

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x, keep)))
        return self.output_norm(x + self.dropout(self.down(self.act(self.up(x)))))


class BertForPretraining(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.word_embeddings = nn.Embedding(cfg.padded_vocab, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab, cfg.hidden)
        self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.pooler = nn.Linear(cfg.hidden, cfg.hidden)
        self.nsp = nn.Linear(cfg.hidden, 2)
        self.mlm_transform = nn.Linear(cfg.hidden, cfg.hidden)
        self.mlm_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        # The decoder weight IS the word embedding matrix (tied); only its bias is separate.
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.padded_vocab))
        self.act = ACTIVATIONS[cfg.activation]
        self.apply(self._init)

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
        x = self.dropout(self.embedding_norm(x))
        keep = input_mask.bool()[:, None, None, :]  # [B, 1, 1, L]: which keys a query may attend to
        for layer in self.layers:
            x = layer(x, keep)
        return x

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.mlm_norm(self.act(self.mlm_transform(hidden)))
        return F.linear(h, self.word_embeddings.weight, self.mlm_bias)

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor, input_mask: torch.Tensor,
                labels: torch.Tensor, nsp_labels: torch.Tensor, max_predictions: int) -> torch.Tensor:
        """Total pretraining loss. `labels` [B, L] is -1 except at masked positions.

        `max_predictions` (the shards' P) bounds the masked positions per sequence, so the
        gather has a static shape [B, P] -- no host sync, and torch.compile sees one graph.
        """
        x = self.encode(input_ids, segment_ids, input_mask)
        nsp_logits = self.nsp(torch.tanh(self.pooler(x[:, 0])))
        k = min(max_predictions, labels.shape[1])
        # A stable sort puts each row's masked positions first, in order; slots past a row's
        # count pick unmasked positions whose label -1 is ignored by the loss.
        order = torch.sort((labels != -1).to(torch.int32), dim=1, descending=True, stable=True).indices[:, :k]
        picked = torch.gather(x, 1, order[:, :, None].expand(-1, -1, x.shape[2]))
        mlm_logits = self.mlm_logits(picked)
        mlm_loss = F.cross_entropy(mlm_logits.reshape(-1, mlm_logits.shape[-1]).float(),
                                   torch.gather(labels, 1, order).reshape(-1), ignore_index=-1)
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


def training_flops(cfg: BertConfig, seq_len: int, sequences: float, masked_tokens: float) -> float:
    """Training FLOPs (forward + backward = 3x forward) for `sequences` of `seq_len` tokens.

    6 x (weights used per token) x tokens for the encoder's dense layers, plus the attention
    score and value products (2 x 2 x L x hidden per token per layer, forward), and the MLM
    head only on the `masked_tokens` it actually runs on. Embedding lookups, LayerNorm,
    softmax and the pooler/NSP head are left out (under 1% for BERT-base).
    """
    h, n = cfg.hidden, cfg.layers
    tokens = sequences * seq_len
    dense = n * (4 * h * h + 2 * h * cfg.intermediate)
    attention = n * 2 * seq_len * h
    head = h * h + h * cfg.padded_vocab
    return 6.0 * (tokens * (dense + attention) + masked_tokens * head)
