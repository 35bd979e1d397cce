"""Models whose parameters are sharded over ranks (FSDP2's ``fully_shard``, FSDP1's ``FullyShardedDataParallel``,
DTensor parameters): gathered once for an evaluation, or refused with the fix named.

kgeval scores a model through ``score_t`` / ``score_h`` / its query/candidate form, not its root's ``forward``, so
the hooks with which FSDP gathers parameters around ``forward`` do not run for the root: the methods would meet
shards. For the block of :func:`gathered_parameters`:

- every FSDP2 module is held unsharded after its forward (``set_reshard_after_forward(False)``, each module's
  setting restored afterwards), so that no submodule's forward -- which the model's methods may call, a different
  number of times on each rank -- gathers again: nothing collective happens while scoring;
- every FSDP2 module whose parameters are sharded is unsharded (``unshard()``, a collective: every rank of the mesh
  must call ``evaluate`` too, as under DDP) and resharded afterwards. Under a ``MixedPrecisionPolicy`` whose
  ``param_dtype`` differs from the parameters' own, FSDP gathers them in that dtype: the model is then scored in it,
  and a :class:`kgeval.exceptions.PrecisionWarning` says so;
- an FSDP1 wrapper's full parameters are summoned (``summon_full_params(writeback=False)``: nothing the evaluation
  could write reaches the shards); the module inside an FSDP1 wrapper, handed over without it, is refused (its
  parameters are FSDP's flat shards).

A parameter still a DTensor after that (tensor parallelism without FSDP) is refused: kgeval needs whole tensors.

The torch modules are looked up only where the program loaded them (an FSDP model has loaded them).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from kgeval.exceptions import PrecisionWarning, warn_caller

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


def _fsdp2_modules(model: Any) -> list[Any]:
    fsdp_module = _loaded("torch.distributed.fsdp", "FSDPModule")
    return [module for module in _modules(model) if fsdp_module is not None and isinstance(module, fsdp_module)]


def _hold_after_forward(module: Any, stack: ExitStack) -> None:
    """``module`` (FSDP2) keeps its parameters unsharded after each forward for the block; its own setting is put
    back afterwards (read from FSDP's state: torch has no public getter). Where that state is not found, the
    setting is left alone."""
    try:
        state = module._get_fsdp_state()
        saved = (state._auto_reshard_after_forward, [(g, g.post_forward_mesh_info) for g in state._fsdp_param_groups])
    except AttributeError:  # another torch: its state reads otherwise
        return

    def restore() -> None:
        state._auto_reshard_after_forward = saved[0]
        for group, info in saved[1]:
            group.post_forward_mesh_info = info

    module.set_reshard_after_forward(False, recurse=False)
    stack.callback(restore)


def _warn_if_gathered_in_another_dtype(before: dict[str, torch.dtype], model: Any, name: str) -> None:
    """A PrecisionWarning when FSDP gathered a parameter in another dtype than its shard's (a
    ``MixedPrecisionPolicy``'s ``param_dtype``)."""
    changed = {(before[path], tensor.dtype) for path, tensor in model.named_parameters()
               if path in before and tensor.dtype != before[path]}  # fmt: skip
    if changed:
        own, gathered = sorted(changed, key=str)[0]
        warn_caller(
            f"kgeval: FSDP gathers {name}'s parameters in {gathered} (they are {own}; its MixedPrecisionPolicy's "
            f"param_dtype), so the model is scored in {gathered}: its ranks are those of that precision. To rank it "
            f"in {own}, evaluate an unsharded copy loaded with its full state dict "
            "(torch.distributed.checkpoint.state_dict.get_model_state_dict(model, "
            "options=StateDictOptions(full_state_dict=True)))",
            PrecisionWarning,
        )


def _refuse_flat_parameters(model: Any, name: str) -> None:
    """TypeError when ``model`` holds FSDP1's flat parameters outside any FSDP1 wrapper kgeval can summon them
    through (the module inside the wrapper, handed over without it)."""
    flat = _loaded("torch.distributed.fsdp._flat_param", "FlatParameter")
    if flat is None or _fsdp1_roots(model):
        return
    for path, tensor in model.named_parameters() if isinstance(model, torch.nn.Module) else ():
        if isinstance(tensor, flat):
            raise TypeError(
                f"{name}'s {path} is a flat parameter of FSDP's FullyShardedDataParallel, which holds this module's "
                "shards: pass the FullyShardedDataParallel wrapper itself (kgeval gathers its full parameters), "
                "not the module inside it"
            )


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
        For a DTensor parameter that is not FSDP's to gather, or FSDP1's flat parameters outside their wrapper.
    """
    _refuse_flat_parameters(model, name)
    with ExitStack() as stack:
        for module in _fsdp2_modules(model):
            _hold_after_forward(module, stack)
        unsharded = _sharded_fsdp2_modules(model)
        if unsharded:
            own = {path: tensor.dtype for path, tensor in model.named_parameters()}
        for module in unsharded:
            module.unshard()
            stack.callback(module.reshard)
        if unsharded:
            _warn_if_gathered_in_another_dtype(own, model, name)
        for root in _fsdp1_roots(model):
            stack.enter_context(type(root).summon_full_params(root, writeback=False))
        _refuse_dtensors(model, name)
        yield
