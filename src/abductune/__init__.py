"""abductune: an autotuner for Triton kernels that explains why a config is slow."""
__version__ = "0.1.0"
