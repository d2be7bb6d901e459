"""Scratch memory for the kernels that split one row over several programs (lessons 04 and 05).

`split_workspace(M, split, device)` returns `(part, count)`:
- `part`: float32, 2 values per program (`M * split * 2`), where each program publishes its chunk's
  statistics; written before it is read in every launch, so it is never cleared.
- `count`: int32, one arrival counter per row. A launch adds `split` to each row's counter and
  never resets it, so every launch must start with each counter at a multiple of `split`: that is
  why the buffers are cached per `split` (and per device and stream, since launches on one stream
  run one after another). The kernels wrap a counter back to 0 before it nears int32 overflow.
On the CPU interpreter the buffers are fresh each call: nothing is shared between runs.
"""
from __future__ import annotations

import torch

_CACHE: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def split_workspace(M: int, split: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(M, int) or not isinstance(split, int) or M < 0 or split < 1:
        raise ValueError(f"split_workspace needs M >= 0 and split >= 1 (ints), got M={M!r}, split={split!r}")
    device = torch.device(device)
    if device.type != "cuda":
        return (torch.empty(2 * M * split, dtype=torch.float32, device=device),
                torch.zeros(M, dtype=torch.int32, device=device))
    key = (device.index if device.index is not None else torch.cuda.current_device(),
           torch.cuda.current_stream(device).cuda_stream, split)
    part, count = _CACHE.get(key, (None, None))
    if part is None or part.numel() < 2 * M * split:
        part = torch.empty(2 * M * split, dtype=torch.float32, device=device)
    if count is None or count.numel() < M:
        count = torch.zeros(M, dtype=torch.int32, device=device)   # 0 is a multiple of every split
    _CACHE[key] = (part, count)
    return part, count
