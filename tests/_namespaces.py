"""The namespaces, devices and dtypes of the contract matrix, and their checks.

``yield_namespace_device_dtype_combinations`` lists every combination that
``tests/test_namespaces.py`` runs, in the manner of scikit-learn's helper of
the same name; :class:`Namespace` turns the NumPy test inputs into arrays of
one combination, brings results back to the host, and checks that a result
is an array of the combination (namespace, device, dtype). A combination whose
library or device is missing is skipped with the reason when it is built.

The wrapper cases (scikit-learn's array API dispatch, which needs
``SCIPY_ARRAY_API=1`` before SciPy is imported) run in one subprocess:
``python -m tests._namespaces`` (from the
repository root) prints one JSON line per case.
"""

import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np

# The dtype of a float array result. "input": the input's float dtype, for
# every result (the contract of issue 25: float32 in, float32 out). "numpy":
# the dtype of NumPy's result (maps in the input's dtype; priors, biases and
# per-row values in float64, as tests/test_array_api.py reads today's NumPy
# path), in float32 where the device has no float64.
RESULT_DTYPE = "input"


def run_under_dispatch(*argv):
    """``python *argv`` from the repository root with ``SCIPY_ARRAY_API=1``.

    scikit-learn's array API dispatch needs it set before SciPy is imported:
    in a process of its own. Returns the completed process (text output).
    """
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    root = Path(__file__).resolve().parent.parent
    return subprocess.run(
        [sys.executable, *argv], env=env, capture_output=True, text=True, cwd=root
    )


# Rows per Dask chunk: the 200-row inputs are split in two.
DASK_CHUNK = 100

# Devices of array-api-strict: the default, another (arrays on two devices
# do not mix) and one without float64 (as Apple's MPS).
STRICT_DEVICES = ("CPU_DEVICE", "device1", "no_float64")


def yield_namespace_device_dtype_combinations():
    """Yield (namespace, device, dtype) names for every combination tested.

    ``device`` is None where the library's default device is meant. Which
    ones can run here is decided when a :class:`Namespace` is built.
    """
    for name in ("numpy", "array_api_strict", "torch", "cupy", "jax", "dask"):
        if name == "torch":
            devices = ("cpu", "cuda")
        elif name == "array_api_strict":
            devices = STRICT_DEVICES
        else:
            devices = (None,)
        for device, dtype in itertools.product(devices, ("float32", "float64")):
            yield name, device, dtype


def combination_id(combination):
    """A short test id such as ``torch-cuda-float32``."""
    return "-".join(part for part in combination if part is not None)


def _skip(reason):
    import pytest

    pytest.skip(reason)


def _import_or_skip(name):
    import pytest

    return pytest.importorskip(name, reason=f"{name} is not installed")


class Namespace:
    """Arrays of one namespace, device and float dtype, made from NumPy ones.

    Building one skips the test (pytest.skip) when the library is not
    installed, the device is absent, or the device has no float64.
    """

    def __init__(self, name, device, dtype):
        self.name, self.device_name, self.dtype_name = name, device, dtype
        self.np_dtype = np.dtype(dtype)
        if name == "numpy":
            self.module, self.device = np, None
        elif name == "array_api_strict":
            self.module = _import_or_skip("array_api_strict")
            self.device = self.module.Device(device)
            info = self.module.__array_namespace_info__()
            if dtype not in info.dtypes(device=self.device):
                _skip(f"array_api_strict's {device} device has no {dtype}")
        elif name == "torch":
            self.module = _import_or_skip("torch")
            if device == "cuda" and not self.module.cuda.is_available():
                _skip("torch has no CUDA device here")
            self.device = self.module.device(device)
        elif name == "cupy":
            self.module = _import_or_skip("cupy")
            try:
                self.device = self.module.cuda.Device()
                self.module.zeros(1)
            except Exception as exc:  # (no driver, no GPU)
                _skip(f"cupy has no usable GPU here: {exc}")
        elif name == "jax":
            jax = _import_or_skip("jax")
            # (jax computes in float32 unless x64 is enabled: float64 tests
            # need it, and it changes nothing for float32 arrays)
            jax.config.update("jax_enable_x64", True)
            self.module, self.device = jax.numpy, None
        elif name == "dask":
            self.module = _import_or_skip("dask.array")
            _import_or_skip("array_api_compat")
            self.device = None
        else:  # pragma: no cover
            raise ValueError(name)
        if name != "numpy":
            _import_or_skip("array_api_compat")
        self.made = []  # (array given to a call, a copy of its values)
        self.sample = self.asarray(np.zeros(2))

    def __repr__(self):
        return f"Namespace({self.name!r}, {self.device_name!r}, {self.dtype_name!r})"

    # -- NumPy -> namespace ------------------------------------------------------------

    def asarray(self, array, dtype=None):
        """``array`` in this namespace, on its device, as ``dtype`` (default:
        the float dtype of this combination; integer arrays keep int64)."""
        array = np.asarray(array)
        if dtype is None:
            kind = array.dtype.kind
            dtype = (
                np.int64 if kind in "iu" else (bool if kind == "b" else self.np_dtype)
            )
        array = np.array(array, dtype=dtype)  # (a copy of the test's data)
        if self.name == "numpy":
            converted = array
        elif self.name in ("array_api_strict", "torch"):
            converted = self.module.asarray(array, device=self.device)
        elif self.name in ("cupy", "jax"):
            converted = self.module.asarray(array)
        else:
            chunks = (DASK_CHUNK,) + (-1,) * (array.ndim - 1) if array.ndim else ()
            converted = self.module.from_array(array, chunks=chunks)
        self.made.append((converted, array.copy()))
        return converted

    def assert_inputs_unchanged(self):
        """No array made for a call was modified by it."""
        for array, values in self.made:
            np.testing.assert_array_equal(
                self.host(array), values, err_msg="an input array was modified"
            )

    def f(self, array):
        """A float array of this combination's dtype."""
        return self.asarray(np.asarray(array, dtype=np.float64))

    def i(self, array):
        """An int64 label array."""
        return self.asarray(np.asarray(array, dtype=np.int64))

    # -- namespace -> NumPy ------------------------------------------------------------

    def is_array(self, value):
        """Whether ``value`` is an array of some array library (not a scalar
        of Python or NumPy)."""
        if isinstance(value, np.ndarray):
            return True
        return (
            hasattr(value, "shape")
            and hasattr(value, "dtype")
            and not (isinstance(value, np.generic))
        )

    def host(self, array):
        """``array`` as a NumPy array (computing a Dask array)."""
        if isinstance(array, np.ndarray):
            return array
        module = type(array).__module__
        if module.startswith("dask"):
            return np.asarray(array.compute())
        if module.startswith("torch"):
            return array.detach().cpu().numpy()
        if module.startswith("cupy"):
            return array.get()
        if module.startswith("array_api_strict"):
            cpu = self.module.Device("CPU_DEVICE")
            return np.from_dlpack(array.to_device(cpu))
        return np.asarray(array)

    def materialize(self, result):
        """``result`` with every array of it on the host (computes Dask)."""
        if self.is_array(result):
            return self.host(result)
        if dataclasses.is_dataclass(result) and not isinstance(result, type):
            return {
                field.name: self.materialize(getattr(result, field.name))
                for field in dataclasses.fields(result)
            }
        if isinstance(result, (tuple, list)):
            return [self.materialize(part) for part in result]
        if isinstance(result, dict):
            return {key: self.materialize(value) for key, value in result.items()}
        return result

    def float64_or_input(self):
        """This namespace's float64 where its device has it, else the input's
        float dtype."""
        try:
            return self.asarray(np.zeros(1), dtype=np.float64).dtype
        except Exception:  # (a device without float64)
            return self.sample.dtype

    # -- the contract --------------------------------------------------------------

    def check_array(self, result, expected, where):
        """``result`` is an array of this namespace, on the inputs' device,
        of the inputs' float dtype (an integer dtype where NumPy's is)."""
        assert self.is_array(result), (
            f"{where}: expected an array of {self.name}, got {type(result).__name__}"
        )
        if self.name == "numpy":
            assert isinstance(result, np.ndarray), f"{where}: {type(result)}"
        else:
            import array_api_compat

            got = array_api_compat.array_namespace(result)
            want = array_api_compat.array_namespace(self.sample)
            assert got is want, (
                f"{where}: namespace {got.__name__}, not {want.__name__}"
            )
            device = array_api_compat.device(result)
            wanted_device = array_api_compat.device(self.sample)
            assert device == wanted_device, (
                f"{where}: on device {device}, not the input's {wanted_device}"
            )
        if expected.dtype.kind == "f":
            wanted = self.sample.dtype
            if RESULT_DTYPE == "numpy" and expected.dtype == np.float64:
                wanted = self.float64_or_input()
            assert result.dtype == wanted, (
                f"{where}: dtype {result.dtype}, not {wanted} ({RESULT_DTYPE} rule)"
            )
        else:
            assert self.host(result).dtype.kind == expected.dtype.kind, (
                f"{where}: dtype {result.dtype}, NumPy's {expected.dtype}"
            )

    def assert_matches(self, result, expected, tol, where="result"):
        """``result`` has the form of the contract and NumPy's values.

        ``expected`` is NumPy's result on the same inputs: an array becomes an
        array of this combination (values within ``tol``, relative, with
        ``tol`` absolute below 1); a float a Python float; an int or bool the
        same number; tuples, lists, dicts and dataclasses part by part.
        """
        if isinstance(expected, np.ndarray):
            self.check_array(result, expected, where)
            actual = self.host(result)
            assert actual.shape == expected.shape, f"{where}: shape {actual.shape}"
            np.testing.assert_allclose(
                actual, expected, rtol=tol, atol=tol, err_msg=where
            )
        elif isinstance(expected, (bool, np.bool_)):
            assert isinstance(result, (bool, np.bool_)), (
                f"{where}: expected a bool, got {type(result).__name__}"
            )
            assert bool(result) == bool(expected), f"{where}: {result} != {expected}"
        elif isinstance(expected, (int, np.integer)):
            assert isinstance(result, (int, np.integer)), (
                f"{where}: expected an int, got {type(result).__name__}"
            )
            # Without float64 the stopping test of an iterative solver compares
            # float32 sums with tol: it may stop one step (of up to three
            # passes, a SQUAREM cycle) off NumPy's, which of the cases moving
            # with the libraries' summation order (NumPy 2.4, array-api-strict
            # 2.6 moved two). The values are still compared to float32 tol.
            slack = {"n_iter": 1, "n_passes": 3}.get(where.rpartition(".")[2], 0)
            slack = slack if self.device_name == "no_float64" else 0
            assert abs(int(result) - int(expected)) <= slack, (
                f"{where}: {result} != {expected}"
            )
        elif isinstance(expected, (float, np.floating)):
            assert isinstance(result, float), (
                f"{where}: expected a Python float, got {type(result).__name__}"
            )
            assert abs(result - expected) <= tol * max(1.0, abs(expected)), (
                f"{where}: {result!r} != NumPy's {float(expected)!r} (tol {tol})"
            )
        elif dataclasses.is_dataclass(expected):
            assert type(result) is type(expected), f"{where}: {type(result)}"
            for field in dataclasses.fields(expected):
                self.assert_matches(
                    getattr(result, field.name),
                    getattr(expected, field.name),
                    tol,
                    f"{where}.{field.name}",
                )
        elif isinstance(expected, (tuple, list)):
            assert isinstance(result, (tuple, list)), f"{where}: {type(result)}"
            assert len(result) == len(expected), f"{where}: length {len(result)}"
            for index, (part, wanted) in enumerate(zip(result, expected, strict=True)):
                self.assert_matches(part, wanted, tol, f"{where}[{index}]")
        elif isinstance(expected, dict):
            assert isinstance(result, dict), f"{where}: {type(result)}"
            assert len(result) == len(expected), f"{where}: keys {list(result)}"
            for (key, part), (wanted_key, wanted) in zip(
                result.items(), expected.items(), strict=True
            ):
                self.assert_matches(key, wanted_key, tol, f"{where} key")
                self.assert_matches(part, wanted, tol, f"{where}[{wanted_key!r}]")
        else:
            assert result == expected, f"{where}: {result!r} != {expected!r}"


def package_warnings(record):
    """(category, message) of the warnings in ``record`` that the caller
    sees from skprior or scikit-learn (not those of the array libraries)."""
    return sorted(
        (w.category.__name__, str(w.message))
        for w in record
        if "site-packages" not in w.filename or "sklearn" in w.filename
    )


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|\bnan\b|\binf\b")


def _same_message(actual, expected):
    """Whether two messages say the same: the same words, and numbers that
    agree to the three digits a message prints (a huge or tiny fitted value,
    such as a temperature sent to infinity, only in its order)."""
    if _NUMBER.sub("#", actual) != _NUMBER.sub("#", expected):
        return False
    numbers = zip(_NUMBER.findall(actual), _NUMBER.findall(expected), strict=True)
    for got, wanted in numbers:
        a, b = float(got), float(wanted)
        if a == b or (np.isnan(a) and np.isnan(b)):
            continue
        if abs(a - b) <= 1e-2 * max(abs(a), abs(b)):
            continue
        if min(abs(a), abs(b)) >= 1e6 or max(abs(a), abs(b)) <= 1e-6:
            continue
        return False
    return True


def assert_same_warnings(caught, expected):
    """``caught`` (from ``package_warnings``) are NumPy's ``expected``: the
    same categories, in the same number, with the same messages."""
    unmatched = list(caught)
    for category, message in expected:
        for index, (got_category, got_message) in enumerate(unmatched):
            if got_category == category and _same_message(got_message, message):
                del unmatched[index]
                break
        else:
            raise AssertionError(
                f"NumPy's warning {category}({message!r}) was not given; got {caught}"
            )
    assert not unmatched, f"warnings NumPy does not give: {unmatched}"


# -- the wrappers under scikit-learn's array API dispatch (run in a subprocess) -------


def identity_model(n_classes=3):
    """A fitted classifier whose features are its logits: decision_function
    returns X, predict_proba softmax(X), in X's namespace, device and dtype.

    It stands for a torch model under scikit-learn's array API dispatch.
    """
    from sklearn.base import BaseEstimator, ClassifierMixin

    class IdentityModel(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            self.classes_ = np.arange(n_classes)
            self.n_features_in_ = n_classes
            return self

        def decision_function(self, X):
            return X * 1.0  # (a new array, of X's namespace)

        def predict_proba(self, X):
            scores = self.decision_function(X)
            if isinstance(scores, np.ndarray):
                scores = np.exp(scores - scores.max(axis=1, keepdims=True))
                return scores / scores.sum(axis=1, keepdims=True)
            import torch

            return torch.softmax(scores, dim=1)

    return IdentityModel().fit(None, None)


def wrapper_data():
    """Logits of 240 rows and 3 classes, their labels, and a shifted batch."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, size=240)
    logits = 1.5 * rng.normal(size=(240, 3)) + 2.0 * np.eye(3)[y]
    shifted_y = rng.choice(3, size=240, p=[0.6, 0.3, 0.1])
    shifted = 1.5 * rng.normal(size=(240, 3)) + 2.0 * np.eye(3)[shifted_y]
    return logits, y, shifted


def wrapper_cases():
    """name -> (wrapper class, parameters, what is called)."""
    from skprior import (
        CANClassifier,
        PriorAdaptedClassifier,
        TemperatureCalibratedClassifier,
    )

    prior = [1 / 3, 1 / 3, 1 / 3]
    cases = {
        "CANClassifier": (CANClassifier, {"tau": 0.5, "train_prior": prior}, "proba"),
        "CANClassifier-fit-reference": (
            CANClassifier,
            {"tau": 0.5, "reference": "fit", "n_iter": 2, "alpha": 2.0},
            "proba",
        ),
    }
    for method in ("mle", "map", "bbse", "rlls"):
        cases[f"PriorAdaptedClassifier-{method}"] = (
            PriorAdaptedClassifier,
            {"method": method},
            "proba",
        )
    cases["PriorAdaptedClassifier-known"] = (
        PriorAdaptedClassifier,
        {"method": "known", "test_prior": [0.6, 0.3, 0.1]},
        "proba",
    )
    for online in ("cumulative", "fth", "flh-ftl"):
        cases[f"PriorAdaptedClassifier-online-{online}"] = (
            PriorAdaptedClassifier,
            {"online": online, "shift_level": None},
            "online",
        )
    for method in ("ec", "nll", "bcts", "nbvs", "vs", "dirichlet"):
        params = {"method": method}
        if method == "dirichlet":
            params["reg_lambda"] = 1e-2
        cases[f"TemperatureCalibratedClassifier-{method}"] = (
            TemperatureCalibratedClassifier,
            params,
            "proba",
        )
    return cases


# Values after a fit by L-BFGS agree to its tolerance, not to the last digits.
WRAPPER_TOL = {"float64": 1e-7, "float32": 1e-5}


def _run_wrapper(cls, params, kind, X, y, X_new):
    wrapper = cls(identity_model(), **params).fit(X, y)
    if kind == "proba":
        return [wrapper.predict_proba(X_new)]
    wrapper.update_prior(X_new[:120])
    wrapper.update_prior(X_new[120:])
    first = wrapper.predict_proba_online(X_new)
    prior = wrapper.online_prior_
    wrapper.reset_prior()
    return [first, prior, wrapper.predict_proba_online(X_new)]


def run_wrapper_case(name, device, dtype):
    """Check one wrapper case on torch (device, dtype) against NumPy."""
    import sklearn
    import torch

    cls, params, kind = wrapper_cases()[name]
    logits, y, shifted = wrapper_data()
    X, X_new = logits.astype(dtype), shifted.astype(dtype)
    with warnings.catch_warnings(record=True) as np_record:
        warnings.simplefilter("always")
        expected = _run_wrapper(cls, params, kind, X, y, X_new)
    ns = Namespace("torch", device, dtype)
    with sklearn.config_context(array_api_dispatch=True):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            result = _run_wrapper(
                cls,
                params,
                kind,
                ns.f(X),
                torch.asarray(y, device=ns.device),
                ns.f(X_new),
            )
    ns.assert_matches(result, expected, WRAPPER_TOL[dtype], name)
    assert_same_warnings(package_warnings(record), package_warnings(np_record))


def wrapper_main():
    """Run every wrapper case on every torch device and dtype; print JSON."""
    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for name, device, dtype in itertools.product(
        wrapper_cases(), devices, ("float32", "float64")
    ):
        try:
            run_wrapper_case(name, device, dtype)
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n" + "".join(
                traceback.format_tb(exc.__traceback__)[-3:]
            )
        print(json.dumps({"case": f"{name}-{device}-{dtype}", "error": error}))
    sys.stdout.flush()


if __name__ == "__main__":
    wrapper_main()
