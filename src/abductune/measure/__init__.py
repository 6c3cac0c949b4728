"""Evaluators: turn configs into measurements (live on a GPU, replayed, or compile-only)."""
from .base import Evaluator

__all__ = ["Evaluator"]
