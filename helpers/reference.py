"""Float64 references: the ground truth every check and benchmark compares against.

They take the inputs exactly as the kernel sees them (already rounded to fp16/bf16/fp32) and
compute in float64 on the same device, so the only error left to judge is the kernel's.
"""
from __future__ import annotations

import torch


def _check_ref_args(x, **params):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last dimension, got shape {tuple(x.shape)}")
    for name, p in params.items():
        if p is not None and tuple(p.shape) != (x.shape[-1],):
            raise ValueError(f"{name} must have shape ({x.shape[-1]},), got {tuple(p.shape)}")


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6):
    """RMSNorm over the last dimension, in float64.

    y = x / sqrt(mean(x**2) + eps) * weight;  rstd = 1 / sqrt(mean(x**2) + eps)
    Returns (y, rstd): y with x's shape, rstd with x.shape[:-1], both float64.
    """
    _check_ref_args(x, weight=weight)
    xd = x.double()
    rstd = torch.rsqrt(xd.pow(2).mean(dim=-1) + eps)
    y = xd * rstd.unsqueeze(-1)
    if weight is not None:
        y = y * weight.double()
    return y, rstd


def layernorm_ref(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                  eps: float = 1e-5):
    """LayerNorm over the last dimension, in float64 (biased variance, as torch.nn.LayerNorm).

    mean = mean(x);  rstd = 1 / sqrt(mean((x - mean)**2) + eps);  y = (x - mean) * rstd * weight + bias
    Returns (y, mean, rstd): y with x's shape, mean and rstd with x.shape[:-1], all float64.
    """
    _check_ref_args(x, weight=weight, bias=bias)
    xd = x.double()
    mean = xd.mean(dim=-1)
    xc = xd - mean.unsqueeze(-1)
    rstd = torch.rsqrt(xc.pow(2).mean(dim=-1) + eps)
    y = xc * rstd.unsqueeze(-1)
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y, mean, rstd


def softmax_ref(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, in float64: exp(x - max) / sum(exp(x - max)).

    -inf entries (masked positions) give 0; a row that is all -inf gives NaN, as torch.softmax.
    """
    _check_ref_args(x)
    xd = x.double()
    e = torch.exp(xd - xd.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
