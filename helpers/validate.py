"""Clear errors for bad inputs, raised before anything reaches a Triton kernel."""
from __future__ import annotations

import math

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_rows_input(x, weight=None, eps: float = 1e-6, *, bias=None, max_n: int | None = None,
                     what: str = "kernel", longer: str = "use the looped kernel for longer rows",
                     dtypes: tuple = FLOAT_DTYPES) -> tuple[int, int]:
    """Validate a row-wise norm's inputs; return (M, N): rows and row length.

    x: fp32/fp16/bf16 tensor, at least 1-D, last dimension contiguous (stride 1), on the device
    Triton runs on (the GPU, or the CPU under the interpreter). weight: None or a float tensor of
    shape (N,) on the same device; bias (LayerNorm) the same. eps: a finite float >= 0. max_n: the largest N the kernel
    handles in one block (`longer` says what to use beyond it). dtypes: the dtypes the kernel takes.
    """
    from .env import device

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
    if x.dtype not in dtypes:
        raise TypeError(f"x must be one of ({names}) for this {what}, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (the row being normalised), got a scalar")
    N = x.shape[-1]
    if N == 0 or x.numel() == 0:
        raise ValueError(f"x has no elements to normalise: shape {tuple(x.shape)}")
    if N > 1 and x.stride(-1) != 1:
        raise ValueError(f"x's last dimension must be contiguous (stride 1), got stride {x.stride(-1)}: "
                         "pass x.contiguous()")
    want = device()
    if x.device.type != want:
        raise ValueError(f"x is on {x.device}, but this {what} runs on {want} here: move it with x.to('{want}')")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, got {type(p).__name__}")
        if tuple(p.shape) != (N,):
            raise ValueError(f"{name} must have shape ({N},) to match x's last dimension, got {tuple(p.shape)}")
        if p.dtype not in dtypes:
            raise TypeError(f"{name} must be one of ({names}) for this {what}, got {p.dtype}")
        if p.device != x.device:
            raise ValueError(f"{name} is on {p.device} but x is on {x.device}")
        if N > 1 and p.stride(0) != 1:
            raise ValueError(f"{name} must be contiguous: pass {name}.contiguous()")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if max_n is not None and N > max_n:
        raise ValueError(f"rows of {N} elements are too large for this {what} (at most {max_n} elements per row); "
                         f"{longer}")
    return x.numel() // N, N
