"""Small real datasets shipped with skprior, for the demo and the examples."""

from skprior.datasets._pmlb import SHIPPED_DATASETS, load_pmlb

__all__ = ["SHIPPED_DATASETS", "load_pmlb"]
