"""The null model of METRICS.md (Expectation and variance under the null model).

Every ranking task i is ranked uniformly at random, r_i ~ U{1, ..., C_i}, with its own num_candidates C_i.
The expectation and variance of MR, MRR and hits@k are sums of per-task terms f(C_i), so they are kept as
additive statistics (:func:`candidate_statistics`) that merge exactly like the rank sums. GMR's moments depend
on n through the exponent 1/n and are computed from the num_candidates records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

EULER_GAMMA = 0.5772156649015329


def harmonic_number(c: torch.Tensor) -> torch.Tensor:
    """H(C) = sum_{j=1..C} 1/j for an int tensor C >= 1, in float64 via digamma (exact to ~1e-15 relative)."""
    return torch.special.digamma(c.to(torch.float64) + 1.0) + EULER_GAMMA


def second_harmonic_number(c: torch.Tensor) -> torch.Tensor:
    """H_2(C) = sum_{j=1..C} 1/j^2 = pi^2/6 - psi'(C + 1), float64."""
    return math.pi**2 / 6.0 - torch.special.polygamma(1, c.to(torch.float64) + 1.0)


def candidate_statistics(num_candidates: torch.Tensor, ks: Sequence[int]) -> dict[str, torch.Tensor]:
    """Per-batch additive null-model sums over tasks (float64 scalars, hits terms of shape (len(ks),)).

    Parameters
    ----------
    num_candidates : LongTensor of shape (n,)
        C_i >= 1 for each task.
    ks : sequence of int

    Returns
    -------
    dict with ``sum_expected_rank`` = sum (C+1)/2, ``sum_rank_variance`` = sum (C^2-1)/12,
    ``sum_expected_reciprocal_rank`` = sum H(C)/C, ``sum_reciprocal_rank_variance`` = sum (C H_2(C) - H(C)^2)/C^2,
    ``sum_hits_probability`` = sum_i p_i and ``sum_hits_variance`` = sum_i p_i (1 - p_i), p_i = min(k/C_i, 1).
    """
    c = num_candidates.to(torch.float64)
    harmonic = harmonic_number(num_candidates)
    k_tensor = torch.as_tensor(list(ks), dtype=torch.float64, device=c.device)
    probability = torch.clamp(k_tensor.unsqueeze(0) / c.unsqueeze(1), max=1.0)
    return {
        "sum_expected_rank": ((c + 1.0) / 2.0).sum(),
        "sum_rank_variance": ((c * c - 1.0) / 12.0).sum(),
        "sum_expected_reciprocal_rank": (harmonic / c).sum(),
        "sum_reciprocal_rank_variance": ((c * second_harmonic_number(num_candidates) - harmonic**2) / (c * c)).sum(),
        "sum_hits_probability": probability.sum(dim=0),
        "sum_hits_variance": (probability * (1.0 - probability)).sum(dim=0),
    }
