"""ci-bench: continuous benchmarking of JAX Pallas kernels."""

__version__ = "0.1.0"
