"""Where a model lives (:func:`model_device`), for the views and the evaluation's boundary."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["model_device"]


def model_device(model: Any) -> torch.device:
    """The device the model's parameters live on (``model.device`` if set; CPU for parameter-free models)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device | str):
        return torch.device(device)
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        for parameter in parameters():
            return parameter.device
    return torch.device("cpu")
