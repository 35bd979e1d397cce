"""Adapters: what makes a model scoreable by kgeval's engine, below it -- models of other libraries (PyKEEN,
PyTorch Geometric, TorchKGE, dicee) scored the way their own library scores them, and models inside torch's
wrappers. :func:`scoring_view` takes off the wrappers (``torch.compile``, ``DataParallel``,
``DistributedDataParallel``, ``AveragedModel``, Lightning Fabric; :mod:`kgeval.adapters.wrappers`) and returns an
adapter's view of a model it recognises, importing that adapter (and its library) only then. The drop-ins that put
kgeval inside other libraries' machinery are in :mod:`kgeval.integrations`.
"""

from __future__ import annotations

import sys
from typing import Any

from kgeval.adapters.wrappers import unwrap

__all__ = ["scoring_view"]


def scoring_view(model: Any) -> Any:
    """The object to score ``model`` through: an adapter's view of the model inside any of torch's wrappers, or
    that model itself.

    Raises
    ------
    TypeError
        When an adapter recognises the model but kgeval cannot score it the way its library does.
    """
    model = unwrap(model).model
    pykeen_models = sys.modules.get("pykeen.models")
    if pykeen_models is not None and isinstance(model, pykeen_models.Model):
        from kgeval.adapters.pykeen import pykeen_view

        return pykeen_view(model)
    pyg_kge = sys.modules.get("torch_geometric.nn.kge")
    if pyg_kge is not None and isinstance(model, pyg_kge.KGEModel):
        from kgeval.adapters.pyg import pyg_view

        return pyg_view(model)
    torchkge_models = sys.modules.get("torchkge.models.interfaces")
    if torchkge_models is not None and isinstance(model, torchkge_models.Model):
        from kgeval.adapters.torchkge import torchkge_view

        return torchkge_view(model)
    dicee_models = sys.modules.get("dicee.models.base_model")
    if dicee_models is not None and isinstance(model, dicee_models.BaseKGE):
        from kgeval.adapters.dicee import dicee_view

        return dicee_view(model)
    return model
