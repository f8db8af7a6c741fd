"""Class-wise calibration (NBVS, VS, Dirichlet with ODIR): functions and estimator."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split

from skprior import (
    TemperatureCalibratedClassifier,
    fit_dirichlet_calibration,
    fit_vector_scaling,
    select_dirichlet_regularization,
    softmax_dirichlet_calibration,
    softmax_vector_scaling,
)
from skprior._utils import _kernels
from skprior._utils._array_api import get_namespace
from skprior.calibration._classwise_solvers import (
    LOG_PROBA_FLOOR,
    dirichlet_loss,
    floored_log_proba,
    vs_loss,
)
from skprior.calibration._rows import Rows


def numpy_rows(values, y, weights):
    """The fit rows of NumPy arrays, as the solvers read them."""
    return Rows(*get_namespace(values), values, y, weights).totalled()


# -- naive references, written from the formulas -------------------------------------


def naive_row_loss(u, label):
    """-log softmax(u)_label for one row, -inf entries being probability 0."""
    finite = u[np.isfinite(u)]
    top = finite.max()
    return top + np.log(np.exp(finite - top).sum()) - u[label]


def naive_vs_loss(logits, y, factors, bias, weights):
    """Weighted mean of -log softmax(w * z_i + b)_{y_i}, row by row."""
    total = 0.0
    for row, label, weight in zip(logits, y, weights, strict=True):
        u = np.array(
            [
                -np.inf if np.isneginf(z) else factors[k] * z + bias[k]
                for k, z in enumerate(row)
            ]
        )
        total += weight * naive_row_loss(u, label)
    return total / weights.sum()


def naive_log_proba(logits):
    """log softmax of each row, floored at LOG_PROBA_FLOOR, row by row."""
    out = np.empty(logits.shape)
    for i, row in enumerate(logits):
        finite = row[np.isfinite(row)]
        lse = finite.max() + np.log(np.exp(finite - finite.max()).sum())
        out[i] = [max(z - lse, LOG_PROBA_FLOOR) for z in row]
    return out


def naive_dirichlet_objective(logits, y, matrix, bias, reg_lambda, reg_mu, weights):
    """Mean log loss of softmax(W log p + b) plus ODIR, with explicit loops."""
    log_proba = naive_log_proba(logits)
    n_classes = len(bias)
    total = 0.0
    for row, label, weight in zip(log_proba, y, weights, strict=True):
        u = np.array(
            [
                sum(matrix[k, j] * row[j] for j in range(n_classes)) + bias[k]
                for k in range(n_classes)
            ]
        )
        total += weight * naive_row_loss(u, label)
    off = sum(
        matrix[k, j] ** 2 for k in range(n_classes) for j in range(n_classes) if k != j
    )
    return (
        total / weights.sum()
        + reg_lambda / (n_classes * (n_classes - 1)) * off
        + reg_mu / n_classes * np.dot(bias, bias)
    )


def small_problem(n=150, n_classes=4, seed=0, zeros=False):
    """Synthetic miscalibrated logits: class-dependent scale and offset."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    y[:n_classes] = np.arange(n_classes)
    logits = 1.5 * np.eye(n_classes)[y] + rng.normal(size=(n, n_classes))
    logits = logits * np.linspace(0.5, 2.0, n_classes) + np.linspace(-1, 1, n_classes)
    if zeros:
        logits[n_classes + 1, 0] = -np.inf  # an exact zero, not the true class
        logits[n_classes + 2, y[n_classes + 2]] = -np.inf  # the true class
    weights = rng.uniform(0.5, 2.0, size=n)
    return logits, y, weights


def cifar_problem(cifar10, n=400):
    proba, labels = cifar10
    with np.errstate(divide="ignore"):
        return np.log(proba[:n].astype(np.float64)), labels[:n]


# -- exactness against the naive references ----------------------------------------


# (a small problem, for scipy's reference: below 10 rows per parameter)
@pytest.mark.filterwarnings("ignore:.* fits [0-9]+ free parameters? on")
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("zeros", [False, True])
def test_vector_scaling_equals_naive_minimum(bias, zeros):
    """The fitted loss equals the minimum of the written-out loss to 1e-6."""
    logits, y, weights = small_problem(n=60, zeros=zeros)
    factors, b = fit_vector_scaling(logits, y, bias=bias, sample_weight=weights)
    # The true class at -inf has infinite loss whatever the parameters: the
    # reference leaves that row out, as documented.
    keep = np.isfinite(logits[np.arange(len(y)), y])
    z, labels, w = logits[keep], y[keep], weights[keep]
    n_classes = z.shape[1]

    def reference(params):
        return naive_vs_loss(
            z,
            labels,
            params[:n_classes],
            params[n_classes:] if bias else np.zeros(n_classes),
            w,
        )

    start = np.concatenate([np.ones(n_classes), np.zeros(n_classes * bias)])
    best = minimize(reference, start, method="BFGS", options={"gtol": 1e-8})
    ours = reference(np.concatenate([factors, b[: n_classes * bias]]))
    assert abs(ours - best.fun) < 1e-6
    assert ours <= best.fun + 1e-9


@pytest.mark.parametrize("zeros", [False, True])
@pytest.mark.parametrize(("reg_lambda", "reg_mu"), [(0.5, 0.5), (2.0, 0.1)])
def test_dirichlet_equals_naive_minimum(zeros, reg_lambda, reg_mu):
    """The fitted objective equals the naive ODIR objective's minimum to 1e-6."""
    logits, y, weights = small_problem(n=40, n_classes=3, zeros=zeros)
    matrix, bias = fit_dirichlet_calibration(
        logits, y, reg_lambda=reg_lambda, reg_mu=reg_mu, sample_weight=weights
    )

    def reference(params):
        return naive_dirichlet_objective(
            logits, y, params[:9].reshape(3, 3), params[9:], reg_lambda, reg_mu, weights
        )

    start = np.concatenate([np.eye(3).ravel(), np.zeros(3)])
    best = minimize(reference, start, method="BFGS", options={"gtol": 1e-8})
    ours = reference(np.concatenate([matrix.ravel(), bias]))
    assert abs(ours - best.fun) < 1e-6
    assert ours <= best.fun + 1e-9


@pytest.mark.parametrize("has_bias", [True, False])
def test_vector_scaling_gradient_matches_finite_differences(has_bias):
    """The analytic gradient of the VS loss equals central differences."""
    logits, y, weights = small_problem(zeros=True)
    keep = np.isfinite(logits[np.arange(len(y)), y])
    z, y, weights = logits[keep], y[keep], weights[keep]
    rng = np.random.default_rng(1)
    params = rng.normal(size=4 * (1 + has_bias))
    params[0] = -0.7  # a negative factor on a column with a -inf entry
    data = numpy_rows(z, y, weights)
    _, grad = vs_loss(params, data, 0.8, has_bias)
    step = 1e-6
    numeric = [
        (
            vs_loss(params + step * e, data, 0.8, has_bias)[0]
            - vs_loss(params - step * e, data, 0.8, has_bias)[0]
        )
        / (2 * step)
        for e in np.eye(len(params))
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_dirichlet_gradient_matches_finite_differences():
    """The analytic gradient of the ODIR objective equals central differences."""
    logits, y, weights = small_problem(n_classes=3, zeros=True)
    log_proba = numpy_rows(floored_log_proba(np, logits.copy()), y, weights)
    rng = np.random.default_rng(2)
    params = np.concatenate([np.eye(3).ravel(), np.zeros(3)]) + 0.3 * rng.normal(
        size=12
    )
    _, grad = dirichlet_loss(params, log_proba, 1.5, 0.7)
    step = 1e-6
    numeric = [
        (
            dirichlet_loss(params + step * e, log_proba, 1.5, 0.7)[0]
            - dirichlet_loss(params - step * e, log_proba, 1.5, 0.7)[0]
        )
        / (2 * step)
        for e in np.eye(len(params))
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


def test_vector_scaling_on_cifar_beats_temperature_in_sample(cifar10):
    """On real outputs VS's in-sample loss is at most NLL temperature scaling's."""
    from skprior import fit_temperature

    logits, y = cifar_problem(cifar10, n=2000)
    temperature = fit_temperature(logits, y, method="nll")
    factors, bias = fit_vector_scaling(logits, y)
    ones = np.ones(len(y))
    vs = naive_vs_loss(logits, y, factors, bias, ones)
    ts = naive_vs_loss(logits, y, np.full(10, 1 / temperature), np.zeros(10), ones)
    assert vs <= ts + 1e-9


# -- blocks, zeros, inputs -----------------------------------------------------------


def test_blocks_give_the_same_answer(monkeypatch):
    """Fits and predictions over many row blocks equal those in one block."""
    logits, y, _ = small_problem(n=200, n_classes=5, zeros=True)

    def everything():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            factors, bias = fit_vector_scaling(logits, y)
            matrix, dbias = fit_dirichlet_calibration(logits, y, reg_lambda=10.0)
        return [
            factors,
            bias,
            matrix,
            dbias,
            softmax_vector_scaling(logits, factors, bias),
            softmax_dirichlet_calibration(logits, matrix, dbias),
        ]

    one_block = everything()
    monkeypatch.setattr(_kernels, "BLOCK_ELEMENTS", 7)
    many_blocks = everything()
    for a, b in zip(one_block, many_blocks, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_vector_scaling_keeps_exact_zeros_at_zero():
    """-inf logits give probability exactly 0, even with factors <= 0."""
    logits = np.array([[1.0, -np.inf, 0.5], [-np.inf, 2.0, 0.0]])
    for factors in ([1.0, -2.0, 0.5], [0.0, 0.0, 1.0]):
        proba = softmax_vector_scaling(logits, factors, [0.1, 0.2, -0.3])
        assert np.all(np.isfinite(proba))
        assert proba[0, 1] == 0 and proba[1, 0] == 0
        np.testing.assert_allclose(proba.sum(axis=1), 1)


def test_dirichlet_treats_exact_zeros_as_the_floor():
    """An exact zero probability is the floor exp(LOG_PROBA_FLOOR): no NaN."""
    proba = np.array([[0.7, 0.3, 0.0], [0.2, 0.3, 0.5]])
    floored = proba.copy()
    floored[0, 2] = np.exp(LOG_PROBA_FLOOR)
    matrix = np.array([[1.2, 0.1, -0.2], [0.0, 0.9, 0.3], [0.4, -0.1, 1.1]])
    with np.errstate(divide="ignore"):
        out = softmax_dirichlet_calibration(np.log(proba), matrix, [0.1, 0.0, -0.1])
    expected = softmax_dirichlet_calibration(np.log(floored), matrix, [0.1, 0, -0.1])
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_dirichlet_fit_with_zero_probabilities_is_finite(cifar10):
    """Exact zeros, even of the true class, leave the fit finite."""
    logits, y = cifar_problem(cifar10, n=300)
    logits[0, :] = -np.inf
    logits[0, y[0]] = 0.0
    logits[1, y[1]] = -np.inf  # the true class has probability 0
    matrix, bias = fit_dirichlet_calibration(logits, y, reg_lambda=1.0)
    assert np.all(np.isfinite(matrix)) and np.all(np.isfinite(bias))
    assert np.all(np.isfinite(softmax_dirichlet_calibration(logits, matrix, bias)))


def test_identity_map_gives_back_the_probabilities(cifar10):
    """W = I, b = 0 is softmax(log p) = p; w = 1, b = 0 is softmax(z)."""
    proba, _ = cifar10
    proba = proba[:50].astype(np.float64)
    proba /= proba.sum(axis=1, keepdims=True)
    logits = np.log(proba)
    np.testing.assert_allclose(
        softmax_dirichlet_calibration(logits, np.eye(10)), proba, rtol=1e-10
    )
    np.testing.assert_allclose(
        softmax_vector_scaling(logits, np.ones(10)), proba, rtol=1e-10
    )


def test_float32_logits_stay_float32():
    """float32 in, float32 out (computed in float64)."""
    logits, y, _ = small_problem()
    logits32 = logits.astype(np.float32)
    assert softmax_vector_scaling(logits32, np.ones(4)).dtype == np.float32
    assert softmax_dirichlet_calibration(logits32, np.eye(4)).dtype == np.float32


def test_dirichlet_on_float32_logits_equals_float64(cifar10):
    """Stored as float32, the log-probabilities give the float64 fit's loss.

    (Their rounding, 6e-8 relative, is that of the float32 logits. The
    parameters themselves agree only to the optimiser's tolerance, about 1e-4
    here: a 1e-9 relative change of the float64 logits moves them as much.)
    """
    proba, y = cifar10
    logits32 = np.log(np.maximum(proba[:2000], 1e-30)).astype(np.float32)
    logits64 = logits32.astype(np.float64)
    y = y[:2000]

    def log_loss(fit):
        calibrated = softmax_dirichlet_calibration(logits64, *fit)
        return -np.mean(np.log(calibrated[np.arange(y.size), y]))

    fit32 = fit_dirichlet_calibration(logits32, y, reg_lambda=1.0)
    fit64 = fit_dirichlet_calibration(logits64, y, reg_lambda=1.0)
    assert abs(log_loss(fit32) - log_loss(fit64)) < 1e-6


def test_zero_weights_equal_dropping_the_rows():
    """Rows of weight 0 are skipped by index; the fit is that without them."""
    logits, y, _ = small_problem(n=300, n_classes=3)
    weights = np.ones(300)
    weights[::4] = 0
    kept = weights > 0
    for reg_lambda in (1.0, "auto"):
        a = fit_dirichlet_calibration(
            logits, y, reg_lambda=reg_lambda, sample_weight=weights
        )
        b = fit_dirichlet_calibration(logits[kept], y[kept], reg_lambda=reg_lambda)
        np.testing.assert_allclose(a[0], b[0], atol=1e-12)
        np.testing.assert_allclose(a[1], b[1], atol=1e-12)


def test_integer_weights_equal_repeated_rows():
    """A weight of 2 is the same row twice."""
    logits, y, _ = small_problem(n=60, n_classes=3)
    weights = np.ones(60)
    weights[:20] = 2
    repeated = np.concatenate([logits[:20], logits])
    y_repeated = np.concatenate([y[:20], y])
    a = fit_vector_scaling(logits, y, sample_weight=weights)
    b = fit_vector_scaling(repeated, y_repeated)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5)
    np.testing.assert_allclose(a[1], b[1], atol=1e-5)
    c = fit_dirichlet_calibration(logits, y, reg_lambda=1.0, sample_weight=weights)
    d = fit_dirichlet_calibration(repeated, y_repeated, reg_lambda=1.0)
    np.testing.assert_allclose(c[0], d[0], atol=1e-5)


def test_input_arrays_not_modified():
    """The caller's arrays come back unchanged."""
    logits, y, weights = small_problem(zeros=True)
    copies = [logits.copy(), y.copy(), weights.copy()]
    fit_vector_scaling(logits, y, sample_weight=weights)
    fit_dirichlet_calibration(logits, y, reg_lambda=1.0, sample_weight=weights)
    for before, after in zip(copies, [logits, y, weights], strict=True):
        np.testing.assert_array_equal(before, after)


def test_classes_without_rows_are_named_in_a_short_message():
    """10,000 classes of which 950 have rows: the error listed the 9,000 others
    (54,000 characters); it gives their number and the first ten."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 500, 1000)
    z = rng.normal(size=(1000, 5000)).astype(np.float32)
    with pytest.raises(
        ValueError, match=r"but 4\d{3} of them \(columns (\d+, ){10}\.\.\.\)"
    ) as e:
        fit_vector_scaling(z, y)
    assert len(str(e.value)) < 600


@pytest.mark.parametrize(
    ("func", "kwargs", "match"),
    [
        (fit_vector_scaling, {"y": [0, 1, 5]}, "outside 0..2"),
        (fit_vector_scaling, {"y": [0, 1]}, "one label per row"),
        (fit_vector_scaling, {"y": [0, 1, 1]}, "needs every class"),
        (fit_dirichlet_calibration, {"y": [0, 1, 1], "reg_lambda": 1.0}, "every"),
        (fit_dirichlet_calibration, {"reg_lambda": -1.0}, "reg_lambda"),
        (fit_dirichlet_calibration, {"reg_mu": "x"}, "reg_mu"),
        (fit_dirichlet_calibration, {}, "cross-validation"),
    ],
)
def test_bad_input_raises_clear_error(func, kwargs, match):
    """Bad labels or parameters: an error naming the argument and the fix."""
    kwargs = {"y": [0, 1, 2], **kwargs}
    with pytest.raises(ValueError, match=match):
        func(3 * np.eye(3), **kwargs)


def test_apply_functions_reject_bad_parameters():
    """Wrong shapes or non-finite parameters are refused with their name."""
    logits = np.zeros((2, 3))
    with pytest.raises(ValueError, match="weights must be"):
        softmax_vector_scaling(logits, [1.0, 1.0])
    with pytest.raises(ValueError, match="bias must be"):
        softmax_vector_scaling(logits, [1.0, 1.0, 1.0], [0.0, np.nan, 0.0])
    with pytest.raises(ValueError, match="matrix must be"):
        softmax_dirichlet_calibration(logits, np.eye(2))


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda z: softmax_vector_scaling(z, [1.0, 1.0]),
            r"weights .* shape \(3,\): one entry per class \(3\), got shape \(2,\)\.$",
        ),
        (
            lambda z: softmax_vector_scaling(z, [1.0, np.inf, 1.0]),
            r"weights .* got NaN or infinite values\.$",
        ),
        (
            lambda z: softmax_dirichlet_calibration(z, np.eye(2)),
            r"matrix .* shape \(3, 3\): .* per class \(3\), got shape \(2, 2\)\.$",
        ),
        (
            lambda z: softmax_dirichlet_calibration(z, [[1.0, 2.0], [3.0]]),
            r"matrix .* got a list that is not a rectangular array of numbers\.$",
        ),
    ],
)
def test_parameter_errors_name_the_shape_not_the_values(call, match):
    """The message says what is wrong (shape, values), never the array's repr,
    which differs from one namespace to another."""
    with pytest.raises(ValueError, match=match) as caught:
        call(np.zeros((2, 3)))
    assert "array(" not in str(caught.value)


# (4 rows that vector scaling separates: its own warnings are tested below)
@pytest.mark.filterwarnings("ignore:.* fits [0-9]+ free parameters? on")
@pytest.mark.filterwarnings("ignore:.* was fitted on data it separates")
def test_probabilities_passed_as_logits_warn():
    """Probabilities in place of logits are flagged."""
    proba = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]])
    with pytest.warns(UserWarning, match="look like probabilities"):
        fit_vector_scaling(proba, [0, 1, 1, 1])


# -- the default regularisation -----------------------------------------------------


def test_auto_regularisation_is_deterministic_and_from_the_grid():
    """The choice is the grid value of least CV loss, the same every time."""
    logits, y, _ = small_problem(n=300, n_classes=3)
    chosen, scores = select_dirichlet_regularization(logits, y)
    assert chosen == min(scores, key=scores.get)
    assert select_dirichlet_regularization(logits, y) == (chosen, scores)
    matrix, bias = fit_dirichlet_calibration(logits, y)
    expected = fit_dirichlet_calibration(logits, y, reg_lambda=chosen)
    np.testing.assert_array_equal(matrix, expected[0])


def test_auto_regularisation_generalises(cifar10):
    """Default Dirichlet, fitted on 1,000 real rows, is no worse held out than
    NLL temperature scaling (+0.01) on the next 1,000."""
    from skprior import fit_temperature, softmax_temperature

    logits, y = cifar_problem(cifar10, n=2000)
    fit, test = slice(0, 1000), slice(1000, 2000)
    matrix, bias = fit_dirichlet_calibration(logits[fit], y[fit])
    temperature = fit_temperature(logits[fit], y[fit], method="nll")
    rows = np.arange(1000)
    dirichlet = softmax_dirichlet_calibration(logits[test], matrix, bias)
    scaled = softmax_temperature(logits[test], temperature)
    nll_dirichlet = -np.mean(np.log(dirichlet[rows, y[test]]))
    nll_temperature = -np.mean(np.log(scaled[rows, y[test]]))
    assert nll_dirichlet <= nll_temperature + 0.01


# -- the estimator -------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_split():
    X, y = load_digits(return_X_y=True)
    X_train, X_cal, y_train, y_cal = train_test_split(X, y, random_state=0)
    model = LogisticRegression(max_iter=2000).fit(X_train, y_train)
    return model, X_cal, y_cal


@pytest.mark.parametrize("method", ["nbvs", "vs", "dirichlet"])
def test_estimator_matches_array_functions(method, digits_split):
    """predict_proba applies the map the array functions fit."""
    model, X, y = digits_split
    calibrated = TemperatureCalibratedClassifier(
        model, method=method, reg_lambda=1.0 if method == "dirichlet" else "auto"
    ).fit(X, y)
    logits = model.decision_function(X)
    if method == "dirichlet":
        matrix, bias = fit_dirichlet_calibration(logits, y, reg_lambda=1.0)
        np.testing.assert_allclose(calibrated.matrix_, matrix)
        expected = softmax_dirichlet_calibration(logits, matrix, bias)
        assert calibrated.reg_lambda_ == calibrated.reg_mu_ == 1.0
    else:
        factors, bias = fit_vector_scaling(logits, y, bias=method == "vs")
        np.testing.assert_allclose(calibrated.weights_, factors)
        expected = softmax_vector_scaling(logits, factors, bias)
        assert hasattr(calibrated, "bias_") == (method == "vs")
    assert not hasattr(calibrated, "temperature_")
    np.testing.assert_allclose(calibrated.predict_proba(X), expected)


def test_refit_with_another_method_drops_old_attributes(digits_split):
    """Attributes of an earlier method do not survive a refit."""
    model, X, y = digits_split
    calibrated = TemperatureCalibratedClassifier(model, method="vs").fit(X, y)
    calibrated.set_params(method="nll").fit(X, y)
    assert not hasattr(calibrated, "weights_") and not hasattr(calibrated, "bias_")
    calibrated.set_params(method="dirichlet", reg_lambda=1.0).fit(X, y)
    assert not hasattr(calibrated, "temperature_")


def test_auto_sets_chosen_penalty_and_scores(digits_split):
    """reg_lambda='auto' stores the chosen penalty and the CV scores."""
    model, X, y = digits_split
    calibrated = TemperatureCalibratedClassifier(model, method="dirichlet").fit(X, y)
    assert calibrated.reg_lambda_ == min(
        calibrated.cv_scores_, key=calibrated.cv_scores_.get
    )
    assert calibrated.reg_mu_ == calibrated.reg_lambda_


def test_regularisation_with_another_method_warns(digits_split):
    """reg_lambda / reg_mu given to a method that ignores them: a warning."""
    model, X, y = digits_split
    with pytest.warns(UserWarning, match="used only by method='dirichlet'"):
        TemperatureCalibratedClassifier(model, method="vs", reg_lambda=1.0).fit(X, y)
    with pytest.warns(UserWarning, match="used only by method='dirichlet'"):
        TemperatureCalibratedClassifier(model, method="nll", reg_mu=1.0).fit(X, y)


# (the weak penalty may stop at L-BFGS's iteration limit on the logits of
# scikit-learn 1.6's LogisticRegression: not what this test is about)
@pytest.mark.filterwarnings("ignore:Dirichlet calibration did not converge")
@pytest.mark.filterwarnings("ignore:.* fits [0-9]+ free parameters? on")
def test_grid_search_over_reg_lambda_keeps_the_model_fitted(digits_split):
    """GridSearchCV tunes reg_lambda over a fitted model without refitting it."""
    model, X, y = digits_split
    coef = model.coef_.copy()
    search = GridSearchCV(
        TemperatureCalibratedClassifier(model, method="dirichlet"),
        {"reg_lambda": [0.1, 10.0]},
        scoring="neg_log_loss",
        cv=3,
    ).fit(X, y)
    assert search.best_params_["reg_lambda"] in (0.1, 10.0)
    inner = search.best_estimator_.estimator_
    assert isinstance(search.best_estimator_.estimator, FrozenEstimator)
    np.testing.assert_array_equal(inner.coef_, coef)
    np.testing.assert_array_equal(model.coef_, coef)


def test_probability_only_model_uses_log_proba(digits_split):
    """A model without decision_function is calibrated on log predict_proba."""
    from sklearn.naive_bayes import GaussianNB

    _, X, y = digits_split
    model = GaussianNB().fit(X[:200], y[:200])
    calibrated = TemperatureCalibratedClassifier(model, method="vs").fit(X, y)
    with np.errstate(divide="ignore"):
        logits = np.log(model.predict_proba(X))
    np.testing.assert_allclose(
        calibrated.predict_proba(X),
        softmax_vector_scaling(logits, calibrated.weights_, calibrated.bias_),
    )


def test_dirichlet_on_logits_of_1e4_leaves_its_start():
    """Logits of +-1e4: the curvature at the start (W = I, log p floored at
    -87) is far from the loss's elsewhere and the preconditioned line search
    fails at its first step; the fit runs again without it and reaches the
    loss of the same data at a tenth of the scale (whose log p agree)."""

    def log_loss(W, b):
        proba = softmax_dirichlet_calibration(z, W, b)
        return -np.mean(np.log(proba[np.arange(len(y)), y]))

    rng = np.random.default_rng(6)
    y = rng.integers(0, 3, 300)
    z = 1e4 * (rng.normal(size=(300, 3)) + 1.5 * np.eye(3)[y])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        W, b = fit_dirichlet_calibration(z, y, reg_lambda=0.1)
    assert not np.allclose(W, np.eye(3))
    reference = log_loss(*fit_dirichlet_calibration(z / 10, y, reg_lambda=0.1))
    assert log_loss(W, b) == pytest.approx(reference, abs=1e-3)


def test_no_bias_vector_scaling_of_constant_rows_keeps_finite_factors():
    """Rows of zeros give every factor zero curvature: no 0 / 0, factors of 1
    (as vector scaling with biases gives)."""
    y = np.arange(30) % 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (few rows)
        warnings.simplefilter("error", RuntimeWarning)
        weights, _ = fit_vector_scaling(np.zeros((30, 3)), y, bias=False)
    np.testing.assert_array_equal(weights, np.ones(3))


@pytest.mark.filterwarnings("ignore:.* fits [0-9]+ free parameters? on")
@pytest.mark.parametrize("seed", [0, 1])
def test_dirichlet_on_logits_of_1e4_reaches_the_naive_minimum(seed):
    """From W = I the softmax of logits of 1e4 is one-hot and the curvature
    that preconditions L-BFGS degenerate: the fit stopped at several times
    the minimum (worse than the uniform map), reporting success. It starts
    from temperature scaling (W = I / T) and reaches the minimum of the
    written-out objective."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, 120)
    y[:4] = np.arange(4)
    logits = 1e4 * (rng.normal(size=(120, 4)) + np.eye(4)[y])
    weights = np.ones(120)
    matrix, bias = fit_dirichlet_calibration(logits, y, reg_lambda=0.01, reg_mu=0.01)

    def reference(params):
        return naive_dirichlet_objective(
            logits, y, params[:16].reshape(4, 4), params[16:], 0.01, 0.01, weights
        )

    best = min(
        (
            minimize(reference, start, method="BFGS", options={"gtol": 1e-8})
            for start in (np.zeros(20), np.r_[np.eye(4).ravel() * 0.01, np.zeros(4)])
        ),
        key=lambda result: result.fun,
    )
    ours = reference(np.concatenate([matrix.ravel(), bias]))
    assert ours < np.log(4)  # (the uniform map's)
    assert ours == pytest.approx(best.fun, abs=1e-6)


def test_few_rows_warning_with_numpy_scalar_regularisation():
    """reg_lambda from np.logspace (a NumPy scalar) on few rows: the fit and
    its warning, as with a Python float. The warning's text raised TypeError
    (the count of free parameters was a NumPy integer, from numpy.bool_)."""
    rng = np.random.default_rng(0)
    logits, y = rng.normal(size=(20, 3)), np.arange(20) % 3
    with pytest.warns(UserWarning, match="fits 3 free parameters on 20"):
        got = fit_dirichlet_calibration(logits, y, reg_lambda=np.float64(1.0))
    with pytest.warns(UserWarning, match="fits 3 free parameters on 20"):
        expected = fit_dirichlet_calibration(logits, y, reg_lambda=1.0)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
