"""Optimizers of the NGC recipe: LAMB (the default) and AdamW.

LAMB follows apex's FusedLAMB as NGC configures it: gradients clipped to a global norm
of 1.0, Adam moments with bias correction, decoupled weight decay 0.01, and the layer-wise
trust ratio |w| / |update| applied to the decayed parameters only (apex's default
`use_nvlamb=False`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from bertdata.config import OPTIMIZERS
from bertdata.errors import BertdataError


class Lamb(torch.optim.Optimizer):
    """Same-shaped parameters of a group are kept in one tensor (each parameter a view of its
    row), so every op of the update runs over ~15 tensors rather than ~200: BERT has that few
    shapes, and a trust ratio per parameter is a norm per row. The gradients are views too, of
    one flat buffer that lives as long as the optimizer: backward accumulates into it, the
    global norm is one reduction over it, the update reads each stack's gradients where they
    are, and `zero_grad` clears it in one write -- no gradient is copied. (A parameter that
    got no gradient steps with a zero one.) `compile=True` compiles the update into a few fused
    kernels: its step count is a tensor on the parameters' device and the moments are
    allocated on the first real step, before the update runs, so nothing in it changes from one
    step to the next but tensor values -- it compiles once and never waits on the host."""

    def __init__(self, params, lr: float = 6e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.01, max_grad_norm: float = 1.0, compile: bool = False):
        if lr <= 0:
            raise BertdataError(f"learning rate must be positive (got {lr})")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.max_grad_norm = max_grad_norm
        self._grads, self._stacks = gradient_buffers([stack_by_shape(group["params"]) for group in self.param_groups])
        self._update = torch.compile(lamb_update, fullgraph=True) if compile else lamb_update

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every gradient 0 in place, whatever `set_to_none` says: they are views of the buffer."""
        for flat in self._grads:
            flat.zero_()
        self._point_grads()

    def _point_grads(self) -> None:
        """Each parameter's .grad its row of the buffer again, where something (a user's
        `p.grad = ...`, DDP's bucket views) put another tensor there: its values are copied in."""
        for stacks in self._stacks:
            for s in stacks:
                for p, row in zip(s.params, s.grad_rows):
                    if p.grad is not row:
                        if p.grad is None:
                            row.zero_()
                        else:
                            row.copy_(p.grad)
                        p.grad = row

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._point_grads()
        groups = []
        for group, stacks in zip(self.param_groups, self._stacks):
            if not stacks:
                continue
            if not torch.is_tensor(group.get("step")):
                group["step"] = torch.zeros((), dtype=torch.float32, device=stacks[0].data.device)
            groups.append(LambGroup([StackStep(s.data, s.grad, *self._moments(s)) for s in stacks],
                                    group["step"], group["lr"], *group["betas"], group["eps"], group["weight_decay"]))
        if groups:
            self._update(groups, self._grads, self.max_grad_norm)
        return loss

    def _moments(self, stack: Stack) -> tuple[torch.Tensor, torch.Tensor]:
        """The stack's two moments, allocated on its first step; each parameter's state holds its row."""
        if not stack.moments:
            for name in ("exp_avg", "exp_avg_sq"):
                stack.moments[name] = torch.zeros_like(stack.data)
                for p, row in zip(stack.params, stack.moments[name]):
                    self.state[p][name] = row
        return stack.moments["exp_avg"], stack.moments["exp_avg_sq"]


class Stack(NamedTuple):
    params: list[torch.Tensor]  # each a view of its row of `data`
    data: torch.Tensor  # [len(params), *shape]
    moments: dict[str, torch.Tensor]  # exp_avg and exp_avg_sq, alike, from the first step on
    grad: torch.Tensor  # like `data`, a view of the optimizer's gradient buffer
    grad_rows: list[torch.Tensor]  # each parameter's .grad: its row of `grad`, the same tensor every step


def stack_by_shape(params: list[torch.Tensor]) -> list[Stack]:
    """`params` regrouped by shape (and dtype and device), each group's storage made one tensor."""
    members: dict[tuple, list[torch.Tensor]] = {}
    for p in params:
        members.setdefault((tuple(p.shape), p.dtype, p.device), []).append(p)
    stacks = []
    for group in members.values():
        data = torch.stack([p.detach() for p in group])
        for p, row in zip(group, data):
            p.data = row
        stacks.append(Stack(group, data, {}, data, []))  # the gradients set by gradient_buffers
    return stacks


def gradient_buffers(groups: list[list[Stack]]) -> tuple[list[torch.Tensor], list[list[Stack]]]:
    """One zeroed flat buffer per dtype and device for the gradients of every group's stacks,
    and the stacks with their `grad` (and each parameter's .grad) a view of it."""
    sizes: dict[tuple, int] = {}
    for s in (s for stacks in groups for s in stacks):
        key = (s.data.dtype, s.data.device)
        sizes[key] = sizes.get(key, 0) + s.data.numel()
    flats = {key: torch.zeros(n, dtype=key[0], device=key[1]) for key, n in sizes.items()}
    used = dict.fromkeys(sizes, 0)
    viewed = []
    for stacks in groups:
        viewed.append([])
        for s in stacks:
            key = (s.data.dtype, s.data.device)
            grad = flats[key][used[key]:used[key] + s.data.numel()].view_as(s.data)
            used[key] += s.data.numel()
            rows = list(grad)
            for p, row in zip(s.params, rows):
                p.grad = row
            viewed[-1].append(s._replace(grad=grad, grad_rows=rows))
    return list(flats.values()), viewed


class StackStep(NamedTuple):
    data: torch.Tensor
    grad: torch.Tensor  # like data
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor


class LambGroup(NamedTuple):
    stacks: list[StackStep]
    step: torch.Tensor  # 0-d, on the parameters' device
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float


def lamb_update(groups: list[LambGroup], flat_grads: list[torch.Tensor], max_grad_norm: float) -> None:
    """One LAMB step over every group: per stack of same-shaped parameters, one op at a time.
    `flat_grads`: the buffers every stack's gradient is a view of (one reduction for the norm)."""
    clip = None
    if max_grad_norm > 0:
        # Divide by max(1, |g| / max_norm): a tensor, so no host sync on the norm.
        squares = torch.stack([flat.float().square().sum() for flat in flat_grads])
        clip = torch.clamp(squares.sum().sqrt() / max_grad_norm, min=1.0)
    for g in groups:
        g.step.add_(1)
        bias1, bias2 = 1 - g.beta1 ** g.step, torch.sqrt(1 - g.beta2 ** g.step)
        for s in g.stacks:
            grad = s.grad
            if clip is not None:
                grad = grad / clip
            s.exp_avg.lerp_(grad, 1 - g.beta1)
            s.exp_avg_sq.mul_(g.beta2).addcmul_(grad, grad, value=1 - g.beta2)
            # update = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * w
            update = s.exp_avg / (s.exp_avg_sq.sqrt() / bias2 + g.eps) / bias1
            if g.weight_decay:
                update = update + g.weight_decay * s.data
                w_norm = torch.linalg.vector_norm(s.data.flatten(1), dim=1)
                u_norm = torch.linalg.vector_norm(update.flatten(1), dim=1)
                ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                update = update * ratio.view(-1, *[1] * (update.dim() - 1))
            s.data.add_(update, alpha=-g.lr)


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
