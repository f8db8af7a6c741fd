"""Any of skprior's array functions, label by label: :func:`per_label`.

The array-function side of the multi-label reduction of ``_multilabel.py``
(the CAN paper's: each label a two-class problem with its own prior).
"""

import inspect

import numpy as np
from scipy.sparse import issparse

from skprior._multilabel import (
    PRIOR_ARGUMENTS,
    as_form,
    label_values,
    label_warnings,
    read_form,
)
from skprior._utils._array_api import (
    get_namespace,
    is_dask,
    known_rows,
    namespace_of,
    result_array,
    to_host,
)
from skprior._utils._validation_arrays import on_host
from skprior.calibration._classwise import (
    softmax_dirichlet_calibration,
    softmax_vector_scaling,
)
from skprior.calibration._temperature import softmax_temperature
from skprior.can._can import alternating_normalization, topk_entropy
from skprior.label_shift._prior import adjust_to_prior

# Arguments of skprior's array functions that per_label splits by label.
DATA_ARGUMENTS = ("proba", "reference", "logits", "y_proba")
LABEL_ARGUMENTS = ("y", "y_true")
# One value per label, stacked on a first axis; the number is the dimension of
# the value a two-class call takes (a scalar temperature is shared).
STACKED_ARGUMENTS = {
    "temperature": 0,
    "bias": 1,
    "weights": 1,
    "confusion": 2,
    "matrix": 2,
}


# The functions whose result is split by row: probabilities, or one value per row.
ROW_RESULTS = {
    alternating_normalization: "proba",
    adjust_to_prior: "proba",
    softmax_temperature: "proba",
    softmax_vector_scaling: "proba",
    softmax_dirichlet_calibration: "proba",
    topk_entropy: "rows",
}


def _array(value):
    """``value`` as an array of its namespace (NumPy for what NumPy converts)."""
    xp, is_numpy = get_namespace(value)
    return xp, np.asarray(value) if is_numpy else value


def _split_data(value, name):
    if issparse(value):
        raise TypeError(
            f"{name} is a sparse matrix; pass {name}.toarray(), an (n_samples, "
            f"n_labels) matrix."
        )
    form, n_labels = read_form(value, name)
    if form == "list":
        return form, list(value)
    xp, value = _array(value)
    if not xp.isdtype(value.dtype, ("real floating", "integral")):
        raise TypeError(
            f"{name} must hold real numbers, one column per label; got dtype "
            f"{value.dtype}."
        )
    if is_dask(xp):  # (sizes unknown after filtering: NaN-long columns otherwise)
        value = known_rows(value, merge=False)
    if value.shape[0] == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(value.shape)}): pass at least one row."
        )
    if n_labels == 0:
        raise ValueError(
            f"{name} has no label (shape {tuple(value.shape)}): pass an "
            f"(n_samples, n_labels) matrix with at least one column."
        )
    if name == "logits":
        # one score per label: the two-class function reads it as logits (0, s)
        return form, [value[:, label] for label in range(n_labels)]
    if not is_dask(xp):  # (a lazy array is checked block by block, later)
        low, high = to_host(xp, xp.min(value), xp.max(value))
        if low < 0 or high > 1:
            raise ValueError(
                f"{name} is read as an (n_samples, n_labels) matrix of the "
                f"probability that each label is present, but holds values from "
                f"{low:.4g} to {high:.4g}. For scores or logits of independent "
                f"labels apply scipy.special.expit (a sigmoid per label, not a "
                f"softmax across them), or pass them as logits=."
            )
    return form, _LabelColumns(xp, value)


class _LabelColumns:
    """The two-class ``(1 - p_l, p_l)`` of each label, made when asked.

    Made one label at a time, so that ``per_label`` holds one label's (n, 2)
    array at a time rather than twice its whole input.
    """

    def __init__(self, xp, value):
        self.xp, self.value = xp, value

    def __len__(self):
        return self.value.shape[1]

    def __getitem__(self, label):
        column = self.value[:, label]
        return self.xp.stack((1 - column, column), axis=1)


def _split_stacked(value, name, n_labels, binary_ndim):
    xp, value = _array(value)
    if binary_ndim == 0:  # (a temperature is a Python number: on the host)
        xp, value = _array(to_host(xp, value)[0])
    if value.ndim == binary_ndim:
        return None  # shared by every label
    if value.ndim != binary_ndim + 1 or value.shape[0] != n_labels:
        raise ValueError(
            f"{name} must be shared by all labels (dimension {binary_ndim}) or "
            f"have one entry per label on its first axis, length {n_labels}; got "
            f"shape {tuple(value.shape)}."
        )
    if binary_ndim == 0:
        return list(value)  # (NumPy scalars, not 0-d arrays)
    return [value[label, ...] for label in range(n_labels)]


def _split_labels(value, name, n_labels):
    _, value = _array(value.toarray() if issparse(value) else value)
    if value.ndim != 2 or value.shape[1] != n_labels:
        raise ValueError(
            f"{name} must be an indicator matrix of shape (n_samples, {n_labels}), "
            f"one 0/1 column per label; got shape {tuple(value.shape)}."
        )
    return [value[:, label] for label in range(n_labels)]


def _assemble(results, kind, form, like):
    """The per-label results put together, in the namespace of ``like``.

    ``like`` is the first multi-label argument (its first array, in list
    form); a vector of numbers comes in its float dtype.
    """
    if isinstance(results[0], tuple):
        return tuple(
            _assemble(list(part), None, form, like)
            for part in zip(*results, strict=True)
        )
    if kind == "proba":
        return as_form(results, form)
    xp, like = _array(like)
    if kind == "rows":
        return xp.stack(results, axis=1)
    if all(np.ndim(r) == 0 and isinstance(r, (int, float, np.number)) for r in results):
        return result_array(xp, np.array(results, dtype=np.float64), like)
    arrays = all(isinstance(r, np.ndarray) or namespace_of(r) for r in results)
    if arrays and len({tuple(r.shape) for r in results}) == 1:
        return xp.stack(results)
    return list(results)


def per_label(func, *args, **kwargs):
    r"""Run a two-class array function on each label of multi-label outputs.

    Each of the L labels is its own two-class problem with prior
    :math:`(1 - q_l, q_l)` (Jia et al., 2021): ``per_label(func, ...)`` calls
    ``func`` once per label, with that label's slice of each per-label argument
    and the other arguments as given, and puts the L results together. It is
    the same as the loop over labels, to the last bit; the multiclass functions
    themselves are unchanged.

    The arguments are recognised by name:

    - ``proba``, ``reference``, ``y_proba``, ``logits``: multi-label outputs,
      either scikit-learn's list of L arrays of shape (n_samples, 2), or an
      (n_samples, L) matrix of the probabilities that each label is present
      (label l is then ``(1 - p[:, l], p[:, l])``; for ``logits``, one score
      per label, which the function reads as the two-class logits ``(0, s)``).
    - ``prior``, ``train_prior``, ``test_prior``, ``init``: per-label priors, of
      shape (L,) -- the prior :math:`q_l` of each label being present -- or
      (L, 2).
    - ``y``, ``y_true``: an (n_samples, L) indicator matrix of 0 and 1.
    - ``temperature``, ``bias``, ``weights``, ``confusion``, ``matrix``: shared
      by every label when given as a two-class call takes them (a float; shape
      (2,); (2, 2)), or one per label stacked on a first axis of length L (as
      ``per_label`` returns the fitted ones).
    - Anything else (``k``, ``tau``, ``method``, ``sample_weight``, ...) is
      passed to every call as it is; ``out=`` is refused (the result is made
      here). An error of one label's call names the label.

    Parameters
    ----------
    func : callable
        A two-class array function, such as :func:`alternating_normalization`,
        :func:`adjust_to_prior`, :func:`estimate_test_prior`,
        :func:`fit_temperature` or :func:`softmax_temperature`.
    *args, **kwargs
        The arguments of ``func``, per-label ones in multi-label form.

    Returns
    -------
    result
        Probabilities (from :func:`alternating_normalization`,
        :func:`adjust_to_prior`, :func:`softmax_temperature`) in the form of
        the first multi-label argument: a list of L arrays of shape
        (n_samples, 2), or an (n_samples, L) matrix of the probability of
        "present". One value per row (:func:`topk_entropy`): shape
        (n_samples, L). Numbers: shape (L,). Arrays of one shape: stacked,
        shape (L, ...) (a prior of each label: (L, 2)). A tuple: each of its
        parts by these rules. Anything else: a list of L results (of
        :func:`estimate_test_prior`, its ``PriorEstimate`` objects:
        ``np.stack([e.prior for e in result])`` gives the (L, 2) priors that
        ``per_label(adjust_to_prior, ...)`` takes).

    See Also
    --------
    CANClassifier, PriorAdaptedClassifier, TemperatureCalibratedClassifier :
        Fitted on a multi-label target, they make the same reduction.

    References
    ----------
    .. [1] Jia, Reiter, Lim, Artzi and Cardie, "When in Doubt: Improving
       Classification Performance with Alternating Normalization", Findings of
       EMNLP 2021. arXiv:2109.13449.

    Examples
    --------
    Two labels, the second rare in training (``q = 0.1``): on the same
    probabilities, CAN pulls the undecided row towards "absent" for it.

    >>> import numpy as np
    >>> from skprior import alternating_normalization, per_label
    >>> proba = np.array([[0.9, 0.05], [0.1, 0.95], [0.5, 0.5]])
    >>> per_label(alternating_normalization, proba, [0.5, 0.1], tau=0.9)
    array([[0.9 , 0.05],
           [0.1 , 0.95],
           [0.5 , 0.1 ]])
    """
    # (not validate_params: it would name per_label in func's own refusals)
    if not callable(func):
        raise TypeError(
            f"per_label's func (its first argument) must be the function to run "
            f"per label, such as skprior.alternating_normalization; got "
            f"{type(func).__name__}."
        )
    bound = inspect.signature(func).bind(*args, **kwargs)
    arguments = bound.arguments
    if arguments.get("out") is not None:
        raise ValueError(
            "per_label makes the multi-label result itself and takes no out=; "
            "drop out= (each label's result would overwrite the last one's)."
        )
    data = [name for name in DATA_ARGUMENTS if arguments.get(name) is not None]
    if not data:
        raise ValueError(
            f"per_label found no multi-label output among the arguments of "
            f"{getattr(func, '__name__', func)}: it splits {DATA_ARGUMENTS} by "
            f"label."
        )
    split, form = {}, None
    for name in data:
        name_form, split[name] = _split_data(arguments[name], name)
        form = form or name_form
    n_labels = len(split[data[0]])
    for name in data[1:]:
        if len(split[name]) != n_labels:
            raise ValueError(
                f"{name} has {len(split[name])} labels but {data[0]} has {n_labels}."
            )
    for name in PRIOR_ARGUMENTS:
        if arguments.get(name) is not None:  # (on the host, as the functions read it)
            split[name] = label_values(on_host(arguments[name]), n_labels, name)
    for name in LABEL_ARGUMENTS:
        if arguments.get(name) is not None:
            split[name] = _split_labels(arguments[name], name, n_labels)
    for name, binary_ndim in STACKED_ARGUMENTS.items():
        if arguments.get(name) is not None:
            values = _split_stacked(arguments[name], name, n_labels, binary_ndim)
            if values is not None:
                split[name] = values

    kind = ROW_RESULTS.get(func)
    # (probabilities of a matrix: one column kept per label, the (n, 2) goes)
    columns = kind == "proba" and form != "list"
    like = arguments[data[0]]
    like = like[0] if form == "list" else like
    xp, is_numpy = get_namespace(like)
    results, out = [], None
    for label in range(n_labels):
        for name, values in split.items():
            arguments[name] = values[label]
        try:
            with label_warnings(label):
                result = func(*bound.args, **bound.kwargs)
        except ValueError as error:  # (named as the wrappers name it)
            raise ValueError(f"Label {label}: {error}") from error
        if columns and is_numpy:  # (written in place)
            if out is None:
                out = np.empty((result.shape[0], n_labels), dtype=result.dtype)
            out[:, label] = result[:, -1]
        else:  # (columns stacked below, on the device)
            results.append(result[:, -1] if columns else result)
    if out is not None:
        return out
    if columns:
        return xp.stack(results, axis=1)
    return _assemble(results, kind, form, like)
