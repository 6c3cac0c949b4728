"""Recorded exhaustive datasets: the format, and importers for community formats."""
from .format import Dataset, read_dataset, write_dataset

__all__ = ["Dataset", "read_dataset", "write_dataset"]
