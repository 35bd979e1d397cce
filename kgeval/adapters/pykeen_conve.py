"""PyKEEN's ConvE network of (h, r) split into a part of the entity, a part of the relation and a part of both: the
head table of a ConvE model without inverse triples (``kgeval.adapters.pykeen.PyKEENHeadTable``) runs only the
last per (entity, relation). Imported only when kgeval meets a PyKEEN model.

ConvE stacks the (c, H, W) images of h and r along the height into a (c, 2H, W) image, then (in evaluation mode)
applies a per-channel affine batch norm, a (kh, kw) convolution without padding, a per-channel affine batch norm, a
ReLU, and a linear layer to the flattened (oc, 2H - kh + 1, W - kw + 1) feature maps, then a batch norm and a ReLU.
An output row i of the convolution reads input rows i .. i + kh - 1: rows i <= H - kh read h's rows only, rows
i >= H read r's only, and the kh - 1 rows between read both. The convolution is linear, so every feature map is
P(h) + Q(r) + bias, P the convolution (without bias) of h's image above zeros and Q that of zeros above r's image;
a feature of h's rows is a function of h alone, one of r's rows of r alone. The linear layer then splits by columns:

    linear(features(h, r)) = W_h f_h(h) + W_m f_m(h, r) + W_r f_r(r) + b

so W_h f_h(h) is computed once per entity and evaluation, W_r f_r(r) + b once per relation, and only the kh - 1
mixed rows -- f_m(h, r) = relu(bn(P_m(h) + Q_m(r) + bias)), ``oc * (kh - 1) * (W - kw + 1)`` features -- and their
columns of the linear layer per (entity, relation): 1,152 of ConvE's 10,368 features at d = 200 (10 x 20 images, 3 x
3 kernels, 32 channels). The sums are the model's in real arithmetic, in another order in float (kgeval's probe of
the table against the model's own ``score_h`` holds them to its tolerance, as every form).

Only PyKEEN's own ``ConvEInteraction`` (its class, not a subclass) with exactly its layers, in evaluation mode, is
split; anything else keeps the head table's plain network (:func:`conve_factors` returns None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

__all__ = ["ConvEFactors", "conve_factors", "parameters_version", "relation_table", "splittable"]

#: the per-entity parts kept for an evaluation at most (bytes): above it each table computes them for its own
#: candidates (still without the rows of the relation)
ENTITY_PARTS_BYTES = 2**29


class ConvEFactors:
    """The parts of a PyKEEN ``ConvEInteraction``'s (h, r) network (module docstring), from its own modules.

    Parameters
    ----------
    interaction : pykeen.nn.modules.ConvEInteraction
        Checked by :func:`conve_factors`.

    Attributes
    ----------
    height, kernel_height : int
        H and kh: the first ``H - kh + 1`` rows of the feature maps read h only, the next ``kh - 1`` both, the
        rest r only.
    entity_part_width : int
        The values :meth:`entity_parts` gives per entity: the linear layer's outputs plus the mixed rows' features.
    """

    def __init__(self, interaction: Any) -> None:
        info = interaction.shape_info
        self.interaction = interaction
        self.image = (info.input_channels, info.image_height, info.image_width)
        self.height, self.kernel_height = info.image_height, info.kernel_height
        layers = list(interaction.hr2d)
        self.input_norm = layers[0] if isinstance(layers[0], nn.BatchNorm2d) else None
        self.conv: nn.Conv2d = next(layer for layer in layers if isinstance(layer, nn.Conv2d))
        after = layers[layers.index(self.conv) + 1 :]
        self.feature_norm = after[0] if isinstance(after[0], nn.BatchNorm2d) else None
        self.linear: nn.Linear = interaction.hr1d[0]
        self.output: list[nn.Module] = list(interaction.hr1d)[1:]  # dropout, batch norm?, ReLU
        rows = 2 * info.image_height - info.kernel_height + 1
        weight = self.linear.weight.view(self.linear.out_features, info.output_channels, rows, -1)
        first, last = self.height - self.kernel_height + 1, self.height
        self.rows = (slice(0, first), slice(first, last), slice(last, rows))
        self.weights = tuple(weight[:, :, part].reshape(weight.shape[0], -1) for part in self.rows)
        self.entity_part_width = self.linear.out_features + self.weights[1].shape[1]

    def _convolved(self, image: torch.Tensor, upper: bool) -> torch.Tensor:
        """(n, oc, 2H - kh + 1, W - kw + 1) convolutions without bias of (n, d) images normalised, stacked above
        (``upper``) or below zeros."""
        x = image.reshape(-1, *self.image)
        if self.input_norm is not None:
            x = self.input_norm(x)
        zeros = torch.zeros_like(x)
        stacked = torch.cat([x, zeros] if upper else [zeros, x], dim=-2)
        return nn.functional.conv2d(stacked, self.conv.weight, None)

    def _features(self, maps: torch.Tensor) -> torch.Tensor:
        """(n, features) of feature maps before their bias: bias, batch norm, ReLU, flattened."""
        bias = self.conv.bias
        x = maps if bias is None else maps + bias.view(1, -1, 1, 1)
        if self.feature_norm is not None:
            x = self.feature_norm(x)
        return torch.relu(x).flatten(1)

    def entity_parts(self, entities: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For (n, d) head embeddings: ((n, out) W_h f_h(h), (n, oc, kh - 1, W') P_m(h))."""
        maps = self._convolved(entities, upper=True)
        return self._features(maps[:, :, self.rows[0]]) @ self.weights[0].T, maps[:, :, self.rows[1]]

    def relation_parts(self, relation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For a (1, d) relation embedding: ((1, out) W_r f_r(r) + b, (1, oc, kh - 1, W') Q_m(r))."""
        maps = self._convolved(relation, upper=False)
        own = self._features(maps[:, :, self.rows[2]]) @ self.weights[2].T
        return (own if self.linear.bias is None else own + self.linear.bias), maps[:, :, self.rows[1]]

    def hidden(
        self, entity_own: torch.Tensor, entity_mixed: torch.Tensor, relation: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        """(n, d) network outputs of n entities with one relation, from their parts."""
        relation_own, relation_mixed = relation
        mixed = self._features(entity_mixed + relation_mixed) @ self.weights[1].T
        x = entity_own + mixed + relation_own
        for layer in self.output:
            x = layer(x)
        return x


def conve_factors(interaction: Any) -> ConvEFactors | None:
    """The split network of ``interaction`` (module docstring) where it is :func:`splittable`; None otherwise."""
    return ConvEFactors(interaction) if splittable(interaction) else None


def splittable(interaction: Any) -> bool:
    """Whether ``interaction`` is PyKEEN's ``ConvEInteraction`` with its own layers -- [BatchNorm2d?, Dropout,
    Conv2d (stride 1, no padding, no dilation, one group), BatchNorm2d?, ReLU, Dropout2d] then [Linear, Dropout,
    BatchNorm1d?, ReLU] --, every one in evaluation mode, batch norms with running statistics. Cheap: a view checks it
    for every table (a module may be put in training mode between two)."""
    from pykeen.nn.modules import ConvEInteraction

    if type(interaction) is not ConvEInteraction or any(module.training for module in interaction.modules()):
        return False
    info = interaction.shape_info
    if not 1 <= info.kernel_height <= info.image_height:
        return False
    if type(interaction.hr2d) is not nn.Sequential or type(interaction.hr1d) is not nn.Sequential:
        return False
    image_layers, output_layers = list(interaction.hr2d.children()), list(interaction.hr1d.children())
    if not _layout(image_layers, [nn.BatchNorm2d, nn.Dropout, nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.Dropout2d],
                   optional=(0, 3)):  # fmt: skip
        return False
    if not _layout(output_layers, [nn.Linear, nn.Dropout, nn.BatchNorm1d, nn.ReLU], optional=(2,)):
        return False
    conv = next(layer for layer in image_layers if type(layer) is nn.Conv2d)
    plain = (conv.stride, conv.padding, conv.dilation, conv.groups, conv.padding_mode) == ((1, 1), (0, 0), (1, 1), 1,
                                                                                           "zeros")  # fmt: skip
    norms = [module for module in interaction.modules() if isinstance(module, nn.modules.batchnorm._BatchNorm)]
    linear = cast(nn.Linear, output_layers[0])  # checked by _layout
    return plain and all(norm.running_mean is not None for norm in norms) and linear.in_features == info.num_in_features


def parameters_version(module: nn.Module) -> tuple[tuple[int, int], ...] | None:
    """(id, version) of every parameter and buffer of ``module`` (a model: its representations and interaction),
    changed by any in-place update (an optimiser's step); None where a tensor keeps no version (an inference
    tensor): then nothing is kept between tables."""
    try:
        return tuple((id(tensor), tensor._version) for tensor in (*module.parameters(), *module.buffers()))
    except RuntimeError:  # "Inference tensors do not track version counter"
        return None


def _layout(layers: list[nn.Module], expected: list[type], optional: tuple[int, ...]) -> bool:
    """Whether ``layers`` are ``expected``'s classes exactly (not subclasses), in order, those at ``optional``
    positions possibly left out."""
    position = 0
    for index, cls in enumerate(expected):
        if position < len(layers) and type(layers[position]) is cls:
            position += 1
        elif index not in optional:
            return False
    return position == len(layers)


def relation_table(
    factors: ConvEFactors,
    relation: torch.Tensor,
    entities: torch.Tensor,
    embeddings: Callable[[torch.Tensor], torch.Tensor],
    cached: tuple[torch.Tensor, torch.Tensor] | None,
    chunk_rows: int,
) -> torch.Tensor:
    """(k, d) network outputs of the candidate heads ``entities`` (k ids) with one relation embedding ((1, d)):
    their per-entity parts from ``cached`` (every entity's, :meth:`ConvEFactors.entity_parts`) or computed from
    ``embeddings(ids)``, in chunks of ``chunk_rows`` candidates."""
    parts = factors.relation_parts(relation)
    outputs = []
    for start in range(0, max(1, entities.numel()), chunk_rows):
        chunk = entities[start : start + chunk_rows]
        own, mixed = (cached[0][chunk], cached[1][chunk]) if cached is not None else factors.entity_parts(
            embeddings(chunk))  # fmt: skip
        outputs.append(factors.hidden(own, mixed, parts))
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs)
