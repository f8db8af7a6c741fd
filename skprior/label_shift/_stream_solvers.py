"""The numerics of on-line prior tracking: EM sums, FLH lifetimes, unbiased BBSE.

Plain functions on validated float64 arrays, behind :mod:`skprior.label_shift._stream`
(no input checks here).
"""

import numpy as np


def responsibility_sums(proba, train_prior, prior):
    r"""``sum_i r_ik`` with the E-step ``r_ik = p_ik (pi_k/q_k) / D_i``.

    ``D_i = sum_k p_ik pi_k / q_k``; computed as two matrix-vector products,
    ``w_k sum_i p_ik / D_i`` with ``w = pi / q``, without an n x K temporary.
    A row with ``D_i = 0`` (all its mass on classes with ``pi_k = 0``) carries
    no usable evidence and counts as ``pi`` itself, as in Bayes' rule.
    """
    weights = prior / train_prior
    d = proba @ weights
    empty = ~(d > 0)
    inverse = np.where(empty, 0.0, 1.0 / np.where(empty, 1.0, d))
    return weights * (inverse @ proba) + empty.sum() * prior


def flh_lifetime(start):
    r"""Lifetime of the expert started at step ``start`` (Hazan and Seshadhri).

    With ``start = r 2^k``, ``r`` odd, the lifetime is :math:`2^{k+2} + 1`:
    the expert is alive at steps ``start <= t < start + lifetime``. At any
    step at most :math:`O(\log t)` experts are alive, and every interval
    ``[s, t]`` holds the start of an alive expert in its first half.
    """
    k = (start & -start).bit_length() - 1  # the power of 2 in start
    return 2 ** (k + 2) + 1


def unbiased_bbse(frequencies, confusion_inverse, held_out_prior):
    r"""``C_cond^{-1} mu`` without clipping: an unbiased estimate of the prior.

    With the joint confusion :math:`C = C_{cond}\,\mathrm{diag}(q)`,
    :math:`C_{cond}^{-1}\mu = q \odot (C^{-1}\mu)`. It sums to one when
    :math:`C` is invertible and may have negative entries: on-line regression
    averages these, and clipping first would bias the average.
    """
    return (confusion_inverse @ frequencies) * held_out_prior
