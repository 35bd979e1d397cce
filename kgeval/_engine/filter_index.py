"""FilterIndex: the known triples as one CSR structure per ranking side -- (h, r) -> sorted tails, (r, t) -> sorted
heads and, for relation prediction, (h, t) -> sorted relations -- and the cache that keeps an evaluator's indices by
the content of their triples.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from kgeval.typing import Target


def _codes(vocabulary: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The position of every id in the sorted ``vocabulary`` of distinct ids; -1 where it is absent."""
    if vocabulary.numel() == 0:
        return torch.full_like(ids, -1)
    ids = ids.contiguous()
    position = torch.searchsorted(vocabulary, ids)
    found = vocabulary[position.clamp(max=vocabulary.numel() - 1)] == ids
    return torch.where(found, position, -1)


def pack_pairs(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """One int64 key per (first, second) id pair, in lexicographic order and injective for any ids >= 0.

    Mixed radix with the columns' own sizes when their product fits in 63 bits; otherwise each column is first
    replaced by the rank of its value among its distinct values (at most n each, so the product always fits).
    A fixed shift such as ``(first << 32) | second`` is not used: it collides for ids >= 2**31.
    """
    if first.numel() == 0:
        return first.clone()
    sizes = [int(column.max()) + 1 for column in (first, second)]
    if sizes[0] * sizes[1] < 2**63:
        return first * sizes[1] + second
    first, second = (torch.unique(column, return_inverse=True)[1] for column in (first, second))
    return first * (int(second.max()) + 1) + second


def stable_argsort(values: torch.Tensor) -> torch.Tensor:
    """``torch.argsort(values, stable=True)``; on CPU through numpy, whose stable sort (radix / timsort) is ~20x
    faster than torch's for the nearly sorted int64 keys kgeval sorts."""
    if values.device.type != "cpu":
        return torch.argsort(values, stable=True)
    return torch.from_numpy(np.argsort(values.numpy(), kind="stable"))


def _sorted_unique(triples: torch.Tensor, columns: tuple[int, int, int]) -> torch.Tensor:
    """The unique rows of ``triples`` (m, 3), sorted lexicographically by ``columns``.

    The three ids are packed into one int64 (mixed radix) when they fit, so a single stable 1-D sort and
    ``unique_consecutive`` do the work instead of the much slower ``torch.unique(dim=0)``.
    """
    if triples.numel() == 0:
        return triples.reshape(0, 3)
    first, second, third = (triples[:, c] for c in columns)
    sizes = [int(column.max()) + 1 for column in (first, second, third)]
    if sizes[0] * sizes[1] * sizes[2] < 2**63:
        packed = (first * sizes[1] + second) * sizes[2] + third
        unique = torch.unique_consecutive(packed[stable_argsort(packed)])
        third, rest = unique % sizes[2], unique // sizes[2]
        out = torch.empty(unique.numel(), 3, dtype=torch.int64, device=triples.device)
        out[:, columns[0]], out[:, columns[1]], out[:, columns[2]] = rest // sizes[1], rest % sizes[1], third
        return out
    order = stable_argsort(third)  # ids too large to pack: three stable passes
    for column in (second, first):
        order = order[stable_argsort(column[order])]
    ordered = triples[order]
    keep = torch.ones(ordered.shape[0], dtype=torch.bool, device=triples.device)
    keep[1:] = (ordered[1:] != ordered[:-1]).any(dim=1)
    return ordered[keep]


@dataclass(frozen=True)
class SideIndex:
    """CSR of one side: ``keys`` (K,) sorted packed keys, ``offsets`` (K + 1,), ``values`` (nnz,) entity ids.

    A key packs the positions of its two ids in ``first_ids`` / ``second_ids`` (the sorted distinct ids of each
    key column), so it is exact for every id an int64 holds; an id the index has never seen finds no key.
    """

    keys: torch.Tensor
    offsets: torch.Tensor
    values: torch.Tensor
    first_ids: torch.Tensor
    second_ids: torch.Tensor

    @classmethod
    def build(cls, key_first: torch.Tensor, key_second: torch.Tensor, values: torch.Tensor) -> SideIndex:
        """Build from parallel (m,) columns of unique triples already sorted by (first, second, value)."""
        first_ids, second_ids = torch.unique(key_first), torch.unique(key_second)
        packed = cls._pack(first_ids, second_ids, key_first, key_second)
        sorted_keys, counts = torch.unique_consecutive(packed, return_counts=True)
        offsets = torch.zeros(sorted_keys.numel() + 1, dtype=torch.int64, device=packed.device)
        offsets[1:] = torch.cumsum(counts, dim=0)
        return cls(
            keys=sorted_keys, offsets=offsets, values=values.contiguous(), first_ids=first_ids, second_ids=second_ids
        )

    @staticmethod
    def _pack(
        first_ids: torch.Tensor, second_ids: torch.Tensor, key_first: torch.Tensor, key_second: torch.Tensor
    ) -> torch.Tensor:
        """Keys (first position) * |second_ids| + (second position); -1 where an id is not in the index."""
        first, second = _codes(first_ids, key_first), _codes(second_ids, key_second)
        return torch.where((first < 0) | (second < 0), -1, first * second_ids.numel() + second)

    def lookup(self, key_first: torch.Tensor, key_second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Start offsets and lengths (both (B,)) of each query key's value run; length 0 for unknown keys."""
        packed = self._pack(self.first_ids, self.second_ids, key_first, key_second)
        if self.keys.numel() == 0:
            return torch.zeros_like(packed), torch.zeros_like(packed)
        position = torch.searchsorted(self.keys, packed)
        clamped = position.clamp(max=self.keys.numel() - 1)
        found = (position < self.keys.numel()) & (self.keys[clamped] == packed)
        start = torch.where(found, self.offsets[clamped], torch.zeros_like(packed))
        length = torch.where(found, self.offsets[clamped + 1] - self.offsets[clamped], torch.zeros_like(packed))
        return start, length

    def expand(
        self, start: torch.Tensor, length: torch.Tensor, total: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The (row, value) pairs of the runs [start, start + length) of each row, row by row: LongTensors of
        shape (total,). ``total`` = ``length.sum()``; read from the device when not given."""
        total = int(length.sum()) if total is None else total
        rows = torch.repeat_interleave(torch.arange(start.numel(), device=start.device), length, output_size=total)
        shift = start - (torch.cumsum(length, dim=0) - length)
        return rows, self.values[torch.arange(total, device=start.device) + shift[rows]]

    def contains(self, starts: torch.Tensor, lengths: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Whether each ``values[i]`` is in the run [starts[i], starts[i] + lengths[i]) of :attr:`values` (runs as
        :meth:`lookup` gives them; all LongTensors of one shape): BoolTensor of that shape.

        One binary search per value over the runs' (start, value) keys, which are in ascending order because the
        runs are consecutive and sorted within."""
        if self.values.numel() == 0:
            return torch.zeros_like(values, dtype=torch.bool)
        keys, bound = self._run_keys
        if keys is None:  # run start * bound + value would overflow: pack both sides together
            packed = pack_pairs(torch.cat([self._run_starts, starts]), torch.cat([self.values, values.clamp(min=0)]))
            keys, probe = packed[: self.values.numel()], packed[self.values.numel() :]
        else:
            probe = starts * bound + values.clamp(0, bound - 1)
        position = torch.searchsorted(keys, probe).clamp(max=keys.numel() - 1)
        return (lengths > 0) & (values >= 0) & (values < bound) & (keys[position] == probe)

    @cached_property
    def _run_starts(self) -> torch.Tensor:
        """LongTensor (nnz,): the start offset of the run holding each value."""
        return torch.repeat_interleave(self.offsets[:-1], self.offsets.diff(), output_size=self.values.numel())

    @cached_property
    def _run_keys(self) -> tuple[torch.Tensor | None, int]:
        """(keys (nnz,), bound) of a non-empty index: each value's run start * bound + value, ascending, with
        bound = 1 + the largest value; keys None where they would not fit in an int64 (:meth:`contains` packs)."""
        bound = int(self.values.max()) + 1
        if bound * (self.values.numel() + 1) >= 2**63:
            return None, bound
        return self._run_starts * bound + self.values, bound

    def known_pairs(self, key_first: torch.Tensor, key_second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(row, value) of every known answer of the queries (key_first[i], key_second[i]) -- :meth:`lookup`, then
        :meth:`expand`."""
        return self.expand(*self.lookup(key_first, key_second))


@dataclass(frozen=True)
class StridedSideIndex(SideIndex):
    """A :class:`SideIndex` whose relation key is compared coarsely: the query's relation id ``r`` is looked up as
    ``r // stride`` (the index was built over relation ids divided likewise). A temporal query (h, r · T + τ) then
    finds the answers of (h, r) at every time: the static filter (kgeval.adapters.temporal)."""

    relation_column: int = 1  #: which key column holds the relation: 1 for tails ((h, r)), 0 for heads ((r, t))
    stride: int = 1

    def lookup(self, key_first: torch.Tensor, key_second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.relation_column == 0:
            key_first = torch.div(key_first, self.stride, rounding_mode="floor")
        else:
            key_second = torch.div(key_second, self.stride, rounding_mode="floor")
        return super().lookup(key_first, key_second)


class FilterIndex:
    """The filter set (unique known triples) indexed for both ranking sides.

    Parameters
    ----------
    triples : LongTensor of shape (m, 3)
        Known (h, r, t) triples; duplicates are allowed and collapse.
    relation_stride : int, default=1
        Compare relation ids as ``r // relation_stride`` (in the index and in every lookup of an entity side): with
        packed temporal relations r · T + τ and ``relation_stride=T``, the filter of a query is the answers of its
        relation at any time (the static filter). 1: relations compared exactly.

    Examples
    --------
    >>> index = FilterIndex(torch.tensor([[0, 0, 1], [0, 0, 2], [3, 0, 2]]))
    >>> start, length = index.sides["tail"].lookup(torch.tensor([0, 1]), torch.tensor([0, 0]))  # (0, 0, ?), (1, 0, ?)
    >>> index.sides["tail"].values[start[0] : start[0] + length[0]].tolist(), length[1].item()
    ([1, 2], 0)
    """

    def __init__(self, triples: torch.Tensor, relation_stride: int = 1) -> None:
        triples = triples.long()
        if relation_stride != 1:
            triples = torch.stack([triples[:, 0], torch.div(triples[:, 1], relation_stride, rounding_mode="floor"),
                                   triples[:, 2]], dim=1)  # fmt: skip
        unique = _sorted_unique(triples, (0, 1, 2))
        head, relation, tail = unique.unbind(dim=1)
        self.num_triples = int(head.numel())
        self.relation_stride = relation_stride
        by_relation_tail = _sorted_unique(unique, (1, 2, 0))
        tails = SideIndex.build(head, relation, tail)
        heads = SideIndex.build(by_relation_tail[:, 1], by_relation_tail[:, 2], by_relation_tail[:, 0])
        if relation_stride != 1:
            tails = StridedSideIndex(**vars(tails), relation_column=1, stride=relation_stride)
            heads = StridedSideIndex(**vars(heads), relation_column=0, stride=relation_stride)
        #: the entity sides, built at once; the relation side is built on its first use (:meth:`side`)
        self.sides: dict[Target, SideIndex] = {"tail": tails, "head": heads}
        self._unique = unique

    def side(self, target: Target) -> SideIndex:
        """The index of one ranking side: key (h, r) -> tails, (r, t) -> heads, (h, t) -> relations."""
        if target not in self.sides:
            if self.relation_stride != 1:
                raise ValueError("a filter index with a relation stride ranks entities only")
            by_head_tail = _sorted_unique(self._unique, (0, 2, 1))
            self.sides[target] = SideIndex.build(by_head_tail[:, 0], by_head_tail[:, 2], by_head_tail[:, 1])
        return self.sides[target]

    @property
    def device(self) -> torch.device:
        return self.sides["tail"].keys.device


#: elements a fingerprint weighs per step (its weights are a (2, 2**20) int64 table per device)
FINGERPRINT_CHUNK = 1 << 20
_FINGERPRINT_WEIGHTS: dict[torch.device, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    """Two rows of random odd int64 weights, fixed for the process, on ``device``."""
    if device not in _FINGERPRINT_WEIGHTS:
        generator = torch.Generator().manual_seed(0x6B67657661)
        shape = (2, FINGERPRINT_CHUNK)
        weights = torch.randint(-(2**62), 2**62, shape, generator=generator, dtype=torch.int64, device="cpu")
        _FINGERPRINT_WEIGHTS[device] = (weights | 1).to(device)
    return _FINGERPRINT_WEIGHTS[device]


def _block_factor(block: int) -> int:
    """An odd pseudo-random int64 factor per block of :func:`content_fingerprint` (splitmix64 of the block's
    number): with the factors 1, 3, 5, ... of before, changes at one offset of two blocks in the ratio -3 : 1
    cancelled out, and a reused evaluator took a changed filter for the cached one."""
    value = (block + 1) * 0x9E3779B97F4A7C15 % 2**64
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 % 2**64
    value = (value ^ (value >> 27)) * 0x94D049BB133111EB % 2**64
    value = (value ^ (value >> 31)) | 1
    return value - 2**64 if value >= 2**63 else value


def content_fingerprint(tensors: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """A key for the tensors' contents, in order: each tensor's shape, dtype and two weighted sums of its values as
    int64 (random odd weights, int64 arithmetic wrapping around), computed where the tensor is -- no copy to the
    host, one synchronisation for them all (one per device). Two different contents get the same key with
    probability about 2**-128.

    It is computed on every call, so it sees every change to a tensor, however it was written (in place, through
    numpy, by a collective, through another view of its storage), at ~1 ms per million ids on a CPU (blake2b of the
    bytes on the host took ~8 ms)."""
    every_sums: list[torch.Tensor] = []
    for tensor in tensors:
        flat = tensor.detach().reshape(-1).long()
        weights = _weights(flat.device)
        sums = torch.zeros(2, dtype=torch.int64, device=flat.device)
        for block, start in enumerate(range(0, flat.numel(), FINGERPRINT_CHUNK)):
            chunk = flat[start : start + FINGERPRINT_CHUNK]
            sums += (chunk * weights[:, : chunk.numel()]).sum(dim=1) * _block_factor(block)
        every_sums.append(sums)
    devices = {sums.device for sums in every_sums}
    read = torch.cat(every_sums).tolist() if len(devices) == 1 else [v for s in every_sums for v in s.tolist()]
    return tuple(
        (tuple(tensor.shape), str(tensor.dtype), read[2 * i], read[2 * i + 1]) for i, tensor in enumerate(tensors)
    )


class FilterIndexCache:
    """A small LRU cache of :class:`FilterIndex` keyed by the content of the triples and the device."""

    def __init__(self, max_size: int = 4) -> None:
        self.max_size = max_size
        self._entries: OrderedDict[tuple[Any, str], FilterIndex] = OrderedDict()  # (content, device/stride)
        self.hits = 0
        self.misses = 0

    def get(self, tensors: Sequence[torch.Tensor], device: torch.device, relation_stride: int = 1) -> FilterIndex:
        """The index of the union of ``tensors`` on ``device`` (relations compared as ``r // relation_stride``),
        built on a miss."""
        return self.get_each(tensors, device, (relation_stride,))[0]

    def get_each(
        self, tensors: Sequence[torch.Tensor], device: torch.device, relation_strides: Sequence[int]
    ) -> list[FilterIndex]:
        """:meth:`get` for each of ``relation_strides``, the content of ``tensors`` fingerprinted once where the
        tensors are (:func:`content_fingerprint`); on a hit nothing is copied."""
        digest = content_fingerprint(tensors)
        return [self._entry((digest, f"{device}/{stride}"), tensors, device, stride) for stride in relation_strides]

    def _entry(
        self, key: tuple[Any, str], tensors: Sequence[torch.Tensor], device: torch.device, relation_stride: int
    ) -> FilterIndex:
        if key in self._entries:
            self.hits += 1
            self._entries.move_to_end(key)
            return self._entries[key]
        self.misses += 1
        index = FilterIndex(torch.cat([t.to(device) for t in tensors]), relation_stride)
        self._entries[key] = index
        if len(self._entries) > self.max_size:
            self._entries.popitem(last=False)
        return index

    def clear(self) -> None:
        self._entries.clear()
