"""Names and defaults of every method's options, in one place.

The estimators, the array functions, their parameter constraints and the
command line all read these, so that a method list or a default is written
once. Nothing heavy is imported here: the command line builds its parser from
this module before it imports NumPy's or scikit-learn's numerics.
"""

# -- CAN ---------------------------------------------------------------------------
UNCERTAINTY_KINDS = ("renormalized", "unrenormalized", "max_over_k")
# k="auto" is min(3, n_classes): Su's k = 3, and k = 2 on binary problems
# (where the top-2 entropy is the entropy of the row).
DEFAULT_K = "auto"
AUTO_K = 3
DEFAULT_TAU = 0.9
DEFAULT_ALPHA = 1.0
DEFAULT_N_ITER = 1
DEFAULT_UNCERTAINTY = "renormalized"
CAN_REFERENCES = ("batch", "fit")

# -- prior adaptation ---------------------------------------------------------------
ESTIMATE_METHODS = ("mle", "map")  # estimate_test_prior
PRIOR_METHODS = (*ESTIMATE_METHODS, "bbse", "rlls", "known")  # PriorAdaptedClassifier
SOLVERS = ("em", "squarem", "pga")
SOURCE_PRIORS = ("labels", "mean_posterior")
DEFAULT_PRIOR_METHOD = "mle"
DEFAULT_SOLVER = "squarem"
DEFAULT_DIRICHLET_ALPHA = 2.0
DEFAULT_MAX_ITER = 10_000
DEFAULT_TOL = 1e-6
# BBSE: the Euclidean projection of the estimate onto the simplex (never farther
# from the true prior than the unconstrained estimate), or the clip-and-
# renormalise of Lipton et al. (the default before RLLS was added).
BBSE_PROJECTIONS = ("simplex", "clip")
DEFAULT_BBSE_PROJECTION = "simplex"
# RLLS: reg="auto" is sigma_min(C) * sqrt(log(2 K / delta) / n) at this delta.
DEFAULT_RLLS_REG = "auto"
RLLS_DELTA = 0.05

# -- streams (on-line prior tracking) -------------------------------------------------
# PriorAdaptedClassifier(online=); the default chosen on benchmarks/bench_stream.py
ONLINE_METHODS = ("aggregate", "cumulative", "fth", "flh-ftl")
DEFAULT_ONLINE = "aggregate"
DEFAULT_STREAM_BUDGET = 1000  # rows kept exactly by CumulativePrior
DEFAULT_FLH_LEARNING_RATE = 16.0  # chosen on benchmarks/bench_stream.py

# -- temperature calibration ----------------------------------------------------------
TEMPERATURE_METHODS = ("ec", "nll")  # fit_temperature
CALIBRATION_METHODS = (*TEMPERATURE_METHODS, "bcts")  # the CLI
CLASSWISE_METHODS = ("nbvs", "vs", "dirichlet")  # vector scaling, Dirichlet
# TemperatureCalibratedClassifier(method=...): the CLI's and the class-wise ones.
ESTIMATOR_CALIBRATION_METHODS = (*CALIBRATION_METHODS, *CLASSWISE_METHODS)
DEFAULT_TEMPERATURE_METHOD = "ec"
# Dirichlet calibration's ODIR penalties: lambda chosen by cross-validation,
# mu tied to it (None: mu = lambda).
DEFAULT_REG_LAMBDA = "auto"
DEFAULT_REG_MU = None

# -- calibration metrics ------------------------------------------------------------
BIN_STRATEGIES = ("uniform", "quantile")
ECE_KINDS = ("top_label", "classwise")
DEFAULT_N_BINS = 15

# -- shipped data ---------------------------------------------------------------------
SHIPPED_DATASETS = ("letter", "vowel")  # skprior.datasets.load_pmlb, skprior demo

# -- the test of no shift before adapting ----------------------------------------------
# Level of the test: 1% of batches without shift are adapted anyway (where the
# estimate is then as noisy as without the test), 99% are left as they are.
DEFAULT_SHIFT_LEVEL = 0.01
