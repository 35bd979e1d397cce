"""A stand-in for the ``torch_scatter`` functions ULTRA's model and tasks call (``scatter``, ``scatter_add``,
``scatter_mean``, ``scatter_max``, ``scatter_min``), written on ``torch.Tensor.scatter_reduce`` with
torch_scatter's semantics: a 1-D ``index`` broadcast along ``dim``, ``dim_size`` default ``index.max() + 1``, an
output slot no element reaches is 0, ``scatter_max`` / ``scatter_min`` also return each slot's first arg (``src``'s
size along ``dim`` where none). Put on ``sys.path`` by ``benchmarks/ultra.py`` only when ``import torch_scatter``
fails (compiling torch_scatter takes long on a small machine); it is no part of kgeval.
"""

from __future__ import annotations

import torch

__all__ = ["scatter", "scatter_add", "scatter_max", "scatter_mean", "scatter_min", "scatter_sum"]


def _broadcast(index: torch.Tensor, src: torch.Tensor, dim: int) -> torch.Tensor:
    """``index`` expanded to ``src``'s shape as torch_scatter does (a 1-D index runs along ``dim``)."""
    if index.dim() == 1:
        for _ in range(dim):
            index = index.unsqueeze(0)
    while index.dim() < src.dim():
        index = index.unsqueeze(-1)
    return index.expand_as(src)


def _output(src: torch.Tensor, index: torch.Tensor, dim: int, dim_size: int | None) -> torch.Tensor:
    size = list(src.shape)
    size[dim] = dim_size if dim_size is not None else (int(index.max()) + 1 if index.numel() else 0)
    return src.new_zeros(size)


def scatter_sum(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> torch.Tensor:  # fmt: skip
    dim = dim % src.dim()
    index = _broadcast(index, src, dim)
    target = _output(src, index, dim, dim_size) if out is None else out
    return target.scatter_add_(dim, index, src)


scatter_add = scatter_sum


def scatter_mean(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                 dim_size: int | None = None) -> torch.Tensor:  # fmt: skip
    dim = dim % src.dim()
    total = scatter_sum(src, index, dim, out, dim_size)
    count = scatter_sum(torch.ones_like(src), index, dim, None, total.shape[dim]).clamp(min=1)
    if total.is_floating_point():
        return total.div_(count)
    return total.div_(count, rounding_mode="floor")


def _extreme(src: torch.Tensor, index: torch.Tensor, dim: int, dim_size: int | None,
             reduce: str) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    dim = dim % src.dim()
    index = _broadcast(index, src, dim)
    values = _output(src, index, dim, dim_size).scatter_reduce_(dim, index, src, reduce, include_self=False)
    positions = torch.arange(src.shape[dim], device=src.device)
    shape = [1] * src.dim()
    shape[dim] = -1
    positions = positions.view(shape).expand_as(src)
    hit = src == values.gather(dim, index)
    never = torch.full_like(positions, src.shape[dim])
    arg = torch.full(values.shape, src.shape[dim], dtype=torch.long, device=src.device)
    arg = arg.scatter_reduce_(dim, index, torch.where(hit, positions, never), "amin", include_self=True)
    return values, arg


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    if out is not None:
        raise NotImplementedError("this torch_scatter stand-in takes no out= for scatter_max")
    return _extreme(src, index, dim, dim_size, "amax")


def scatter_min(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
                dim_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    if out is not None:
        raise NotImplementedError("this torch_scatter stand-in takes no out= for scatter_min")
    return _extreme(src, index, dim, dim_size, "amin")


def scatter(src: torch.Tensor, index: torch.Tensor, dim: int = -1, out: torch.Tensor | None = None,
            dim_size: int | None = None, reduce: str = "sum") -> torch.Tensor:  # fmt: skip
    """torch_scatter.scatter: ``reduce`` one of sum / add / mean / max / min (max and min without their args)."""
    if reduce in ("sum", "add"):
        return scatter_sum(src, index, dim, out, dim_size)
    if reduce == "mean":
        return scatter_mean(src, index, dim, out, dim_size)
    if reduce in ("max", "min"):
        if out is not None:
            raise NotImplementedError(f"this torch_scatter stand-in takes no out= for reduce={reduce!r}")
        return _extreme(src, index, dim, dim_size, "amax" if reduce == "max" else "amin")[0]
    raise ValueError(f"reduce must be sum, add, mean, max or min, got {reduce!r}")
