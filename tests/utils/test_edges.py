"""Edges of the shared validation (issue 29): keys, labels, float range and
tensors that gave silent wrong answers or tracebacks."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from skprior import CANClassifier
from skprior._utils._validation import check_prior


class ReversedClasses(ClassifierMixin, BaseEstimator):
    """A fitted model whose classes_ are not sorted: [2, 1, 0]."""

    def fit(self, X, y):
        self.classes_ = np.array([2, 1, 0])
        return self

    def predict_proba(self, X):
        return np.tile([0.6, 0.3, 0.1], (len(X), 1))


def test_prior_keyed_by_label_is_read_by_label_in_every_form():
    """A dict and a Series of the same content give one prior, in the order
    of classes_, whether the Series' index is sorted or not."""
    pd = pytest.importorskip("pandas")
    content = {0: 0.2, 1: 0.3, 2: 0.5}
    expected = [0.5, 0.3, 0.2]
    for prior in (content, pd.Series(content), pd.Series(content).iloc[::-1]):
        got = check_prior(prior, 3, classes=[2, 1, 0])
        np.testing.assert_allclose(got, expected)
    X, y = np.zeros((4, 1)), np.array([0, 1, 2, 0])
    model = ReversedClasses().fit(X, y)
    by_dict = CANClassifier(model, train_prior=content).fit(X, y)
    by_series = CANClassifier(model, train_prior=pd.Series(content)).fit(X, y)
    np.testing.assert_allclose(by_series.train_prior_, expected)
    np.testing.assert_allclose(by_dict.predict_proba(X), by_series.predict_proba(X))


def test_series_from_a_list_is_read_in_order_where_it_cannot_be_keyed():
    pd = pytest.importorskip("pandas")
    got = check_prior(pd.Series([0.2, 0.8]), 2, classes=["a", "b"])
    np.testing.assert_allclose(got, [0.2, 0.8])


def _logits_and_labels():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((300, 3)) * 2
    labels = rng.integers(0, 3, 300)
    labels[:100] = logits[:100].argmax(axis=1)
    return logits, labels


@pytest.mark.parametrize("weight", [1e308, 1e-320, 3.0])
def test_uniform_weights_of_any_size_are_no_weights(weight):
    """Weights are scale-free: uniform weights of 1e308 (their sum overflowed)
    or 1e-320 (subnormal: divisions by zero) give the unweighted results."""
    from skprior import (
        estimate_source_prior,
        fit_temperature,
        joint_confusion_matrix,
        label_shift_test,
    )

    logits, y = _logits_and_labels()
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    w = np.full(len(y), weight)
    np.testing.assert_allclose(
        fit_temperature(logits, y, sample_weight=w), fit_temperature(logits, y)
    )
    np.testing.assert_allclose(
        joint_confusion_matrix(proba, y, sample_weight=w),
        joint_confusion_matrix(proba, y),
    )
    np.testing.assert_allclose(
        estimate_source_prior(proba, y, sample_weight=w),
        estimate_source_prior(proba, y),
    )
    np.testing.assert_allclose(
        label_shift_test(proba[:50], proba, sample_weight=w).pvalue,
        label_shift_test(proba[:50], proba).pvalue,
    )


def test_train_prior_too_small_to_divide_by_is_refused():
    from skprior import estimate_test_prior

    logits, _ = _logits_and_labels()
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    with pytest.raises(ValueError, match=r"train_prior is 1e-320.*at least 1e-300"):
        estimate_test_prior(proba, [1e-320, 0.5, 0.5])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_logits_beyond_range_are_refused(sign):
    """Logits of +-1e307 gave NaN temperatures (overflow once divided)."""
    from skprior import fit_bias_corrected_temperature, fit_temperature

    logits, y = _logits_and_labels()
    logits[5, 1] = sign * 1e307
    for fit in (fit_temperature, fit_bias_corrected_temperature):
        with pytest.raises(ValueError, match=r"beyond \+-1e\+100 \(first in row 5\)"):
            fit(logits, y)
    logits[5, 1] = -np.inf  # (the log of a zero probability stays allowed)
    assert np.isfinite(fit_temperature(logits, y))


def test_huge_dirichlet_penalty_is_refused():
    from skprior import fit_dirichlet_calibration

    logits, y = _logits_and_labels()
    with pytest.raises(ValueError, match=r"reg_lambda.*\[0.0, 1e\+100\]"):
        fit_dirichlet_calibration(logits, y, reg_lambda=1e308)


def test_bfloat16_probabilities_pass_at_their_precision():
    """Honest bfloat16 rows (8 bits of mantissa) were refused at a 1e-6
    row-sum tolerance, with advice that they may be logits."""
    torch = pytest.importorskip("torch")
    from skprior import adjust_to_prior

    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(100), size=200)
    rows = torch.tensor(proba, dtype=torch.bfloat16)
    assert float((rows.double().sum(dim=1) - 1).abs().max()) > 1e-4
    uniform = np.full(100, 0.01)
    adjusted = adjust_to_prior(rows, uniform, uniform)
    assert torch.is_tensor(adjusted) and adjusted.shape == rows.shape
    with pytest.raises(ValueError, match="must sum to 1"):
        adjust_to_prior(rows * 1.1, uniform, uniform)


def _tensor_cases():
    import skprior as sp

    logits, y = _logits_and_labels()
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return {
        "label_shift_test": lambda P, L, Y: sp.label_shift_test(P[:50], P),
        "joint_confusion_matrix": lambda P, L, Y: sp.joint_confusion_matrix(P, Y),
        "estimate_source_prior": lambda P, L, Y: sp.estimate_source_prior(P, Y),
        "estimate_test_prior": lambda P, L, Y: sp.estimate_test_prior(P, Q3),
        "alternating_normalization": lambda P, L, Y: sp.alternating_normalization(
            P[:10], Q3, reference=P
        ),
        "fit_vector_scaling": lambda P, L, Y: sp.fit_vector_scaling(L, Y),
        "fit_dirichlet_calibration": lambda P, L, Y: sp.fit_dirichlet_calibration(
            L, Y, reg_lambda=1e-3
        ),
        "fit_temperature": lambda P, L, Y: sp.fit_temperature(L, Y),
        "softmax_temperature": lambda P, L, Y: sp.softmax_temperature(L, 2.0),
    }, (proba, logits, y)


Q3 = np.full(3, 1 / 3)


@pytest.mark.parametrize("function", sorted(_tensor_cases()[0]))
def test_tensors_that_require_grad_and_meta_tensors(function):
    """A tensor that requires grad is read (detached); a tensor on the meta
    device (a shape, no values) is refused by name, not with torch's
    'Cannot copy out of meta tensor'."""
    torch = pytest.importorskip("torch")
    cases, (proba, logits, y) = _tensor_cases()
    call = cases[function]
    labels = torch.tensor(y)
    with torch.no_grad():
        expected = call(torch.tensor(proba), torch.tensor(logits), labels)
    got = call(
        torch.tensor(proba, requires_grad=True),
        torch.tensor(logits, requires_grad=True),
        labels,
    )
    assert type(got) is type(expected)
    meta = {"device": "meta", "dtype": torch.float64}
    with pytest.raises(ValueError, match="(proba|logits) is on PyTorch's 'meta'"):
        call(torch.empty((300, 3), **meta), torch.empty((300, 3), **meta), labels)
