"""Models whose parameters are sharded over ranks (FSDP2's ``fully_shard``, FSDP1's ``FullyShardedDataParallel``,
DTensor parameters): gathered once for an evaluation, or refused with the fix named.

kgeval scores a model through ``score_t`` / ``score_h`` / its query/candidate form, not its ``forward``, so the
hooks with which FSDP gathers parameters around ``forward`` never run: the methods would meet shards. For the
block of :func:`gathered_parameters`, every FSDP2 module whose parameters are sharded is unsharded (``unshard()``,
a collective: every rank of the mesh must evaluate too, as under DDP) and resharded afterwards; an FSDP1 wrapper's
full parameters are summoned (``summon_full_params(writeback=False)``: nothing the evaluation could write reaches
the shards). A parameter still a DTensor after that (tensor parallelism without FSDP) is refused: kgeval needs
whole tensors.

The torch modules are looked up only where the program loaded them (an FSDP model has loaded them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

__all__ = ["gathered_parameters"]


def _loaded(module: str, name: str) -> Any:
    """``module.name`` if the program has imported ``module``, else None."""
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def _is_dtensor(tensor: Any) -> bool:
    dtensor = _loaded("torch.distributed.tensor", "DTensor")
    return dtensor is not None and isinstance(tensor, dtensor)


def _modules(model: Any) -> list[torch.nn.Module]:
    return list(model.modules()) if isinstance(model, torch.nn.Module) else []


def _sharded_fsdp2_modules(model: Any) -> list[Any]:
    """The FSDP2 modules (``fully_shard``) of ``model`` whose own parameter group is sharded now: those holding a
    DTensor parameter that no nested FSDP2 module holds (a module the caller unsharded already is left alone)."""
    fsdp_module = _loaded("torch.distributed.fsdp", "FSDPModule")
    if fsdp_module is None:
        return []
    found = []
    for module in _modules(model):
        if not isinstance(module, fsdp_module):
            continue
        nested = {id(p) for child in _modules(module)[1:] if isinstance(child, fsdp_module) for p in child.parameters()}
        if any(_is_dtensor(p) and id(p) not in nested for p in module.parameters()):
            found.append(module)
    return found


def _fsdp1_roots(model: Any) -> list[Any]:
    """The outermost FSDP1 wrappers (``FullyShardedDataParallel``) in ``model`` (``summon_full_params`` recurses)."""
    fsdp1 = _loaded("torch.distributed.fsdp", "FullyShardedDataParallel")
    if fsdp1 is None:
        return []
    roots: list[Any] = []
    for module in _modules(model):
        if isinstance(module, fsdp1) and not any(module in _modules(root) for root in roots):
            roots.append(module)
    return roots


def _refuse_dtensors(model: Any, name: str) -> None:
    """TypeError when a parameter or buffer of ``model`` is still a DTensor (sharded by something kgeval does not
    gather)."""
    if not isinstance(model, torch.nn.Module):
        return
    for path, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if _is_dtensor(tensor):
            raise TypeError(
                f"{name}'s {path} is a DTensor sharded over a device mesh (tensor parallelism?), and kgeval scores "
                "whole tensors through the model's scoring methods, which bypass the hooks that gather it: evaluate "
                "a model holding the full tensors (e.g. a copy loaded with {k: v.full_tensor() for k, v in "
                "model.state_dict().items()}); FSDP models (fully_shard, FullyShardedDataParallel) are gathered by "
                "kgeval itself"
            )


@contextmanager
def gathered_parameters(model: Any, name: str) -> Iterator[None]:
    """For the block, ``model``'s sharded parameters whole on every rank (see the module docstring); sharded again
    afterwards, also on error. ``name``: how an error names the model.

    Raises
    ------
    TypeError
        For a DTensor parameter that is not FSDP's to gather.
    """
    with ExitStack() as stack:
        unsharded = _sharded_fsdp2_modules(model)
        for module in unsharded:
            module.unshard()
            stack.callback(module.reshard)
        for root in _fsdp1_roots(model):
            stack.enter_context(type(root).summon_full_params(root, writeback=False))
        _refuse_dtensors(model, name)
        yield
