"""Optimizers of the NGC recipe: LAMB (the default) and AdamW.

LAMB follows apex's FusedLAMB as NGC configures it: gradients clipped to a global norm
of 1.0, Adam moments with bias correction, decoupled weight decay 0.01, and the layer-wise
trust ratio |w| / |update| applied to the decayed parameters only (apex's default
`use_nvlamb=False`). Every step is a handful of `torch._foreach_*` calls over the whole
parameter list, which on CUDA become a few multi-tensor kernels instead of ~200 per-tensor
launches per op.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from bertdata.config import OPTIMIZERS
from bertdata.errors import BertdataError


class Lamb(torch.optim.Optimizer):
    """`compile=True` compiles the whole update (clipping, moments, trust ratios) into a few fused
    kernels. Its step count is a tensor on the parameters' device and the moments are allocated
    on the first real step, before the update runs: nothing in the update changes from one step
    to the next but tensor values, so it compiles once and never waits on the host."""

    def __init__(self, params, lr: float = 6e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.01, max_grad_norm: float = 1.0, compile: bool = False):
        if lr <= 0:
            raise BertdataError(f"learning rate must be positive (got {lr})")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.max_grad_norm = max_grad_norm
        self._update = torch.compile(lamb_update, fullgraph=True) if compile else lamb_update

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if not self.state[p]:
                    self.state[p]["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    self.state[p]["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if not torch.is_tensor(group.get("step")):
                group["step"] = torch.zeros((), dtype=torch.float32, device=params[0].device)
            groups.append(LambGroup(params, [p.grad for p in params], [self.state[p]["exp_avg"] for p in params],
                                    [self.state[p]["exp_avg_sq"] for p in params], group["step"], group["lr"],
                                    *group["betas"], group["eps"], group["weight_decay"]))
        if groups:
            self._update(groups, self.max_grad_norm)
        return loss


class LambGroup(NamedTuple):
    params: list[torch.Tensor]
    grads: list[torch.Tensor]
    exp_avg: list[torch.Tensor]
    exp_avg_sq: list[torch.Tensor]
    step: torch.Tensor  # 0-d, on the parameters' device
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float


def lamb_update(groups: list[LambGroup], max_grad_norm: float) -> None:
    """One LAMB step over every group, a handful of `torch._foreach_*` calls each: on CUDA
    a few multi-tensor kernels instead of ~200 per-tensor launches per op."""
    clip = None
    if max_grad_norm > 0:
        # Divide by max(1, |g| / max_norm): a tensor, so no host sync on the norm.
        norms = [n for g in groups for n in torch._foreach_norm(g.grads)]
        clip = torch.clamp(torch.linalg.vector_norm(torch.stack(norms)) / max_grad_norm, min=1.0)
    for g in groups:
        grads = torch._foreach_div(g.grads, clip) if clip is not None else g.grads
        g.step.add_(1)
        torch._foreach_lerp_(g.exp_avg, grads, 1 - g.beta1)
        torch._foreach_mul_(g.exp_avg_sq, g.beta2)
        torch._foreach_addcmul_(g.exp_avg_sq, grads, grads, value=1 - g.beta2)

        # update = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * w
        denom = torch._foreach_sqrt(g.exp_avg_sq)
        torch._foreach_div_(denom, torch.sqrt(1 - g.beta2 ** g.step))
        torch._foreach_add_(denom, g.eps)
        update = torch._foreach_div(g.exp_avg, denom)
        torch._foreach_div_(update, 1 - g.beta1 ** g.step)
        if g.weight_decay:
            torch._foreach_add_(update, g.params, alpha=g.weight_decay)
            w_norm = torch.stack(torch._foreach_norm(g.params))
            u_norm = torch.stack(torch._foreach_norm(update))
            ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
            torch._foreach_mul_(update, list(ratio.unbind(0)))
        torch._foreach_add_(g.params, update, alpha=-g.lr)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Biases and LayerNorm parameters are not decayed (the recipe's `no_decay` list)."""
    no_decay = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters()}
    decay, plain = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (plain if name.endswith("bias") or id(p) in no_decay else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


def build_optimizer(name: str, model: nn.Module, lr: float, device: torch.device,
                    weight_decay: float = 0.01, compile: bool = False) -> torch.optim.Optimizer:
    """`compile`: LAMB's update compiled (AdamW's fused CUDA kernel is one launch already)."""
    groups = param_groups(model, weight_decay)
    if name == "lamb":
        return Lamb(groups, lr=lr, weight_decay=weight_decay, compile=compile)
    if name == "adamw":
        # The fused kernel is CUDA-only here; foreach is the fast path elsewhere.
        fused = device.type == "cuda"
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6,
                                 fused=fused, foreach=None if fused else True)
    raise BertdataError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
