"""What every method shares: arrays of any library, row blocks, checks, options.

Private: nothing here is public API. ``_array_api`` (namespaces, devices, host
transfers), ``_kernels`` (row blocks and the NumPy fast reductions),
``_validation`` and ``_validation_labels`` (one checker per kind of input, for
arrays of every library, on the conversions of ``_validation_arrays``),
``_constraints`` and ``_options`` (parameter constraints, method names and
defaults), ``_sklearn_compat`` (the only imports of scikit-learn's private
helpers) and ``_npy_blocks`` (files larger than memory as Dask arrays).
"""
