"""Float64 references: the ground truth every check and benchmark compares against.

They take the inputs exactly as the kernel sees them (already rounded to fp16/bf16/fp32) and
compute in float64 on the same device, so the only error left to judge is the kernel's.
"""
from __future__ import annotations

import torch


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6):
    """RMSNorm over the last dimension, in float64.

    y = x / sqrt(mean(x**2) + eps) * weight;  rstd = 1 / sqrt(mean(x**2) + eps)
    Returns (y, rstd): y with x's shape, rstd with x.shape[:-1], both float64.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last dimension, got shape {tuple(x.shape)}")
    if weight is not None and tuple(weight.shape) != (x.shape[-1],):
        raise ValueError(f"weight must have shape ({x.shape[-1]},), got {tuple(weight.shape)}")
    xd = x.double()
    rstd = torch.rsqrt(xd.pow(2).mean(dim=-1) + eps)
    y = xd * rstd.unsqueeze(-1)
    if weight is not None:
        y = y * weight.double()
    return y, rstd
