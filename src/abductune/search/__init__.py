"""Search strategies under one ask/tell interface (see base.py)."""
from .base import Budget, Search, SearchContext, SearchResult, Strategy, run
from .registry import STRATEGIES, make_strategy

__all__ = ["Budget", "Search", "SearchContext", "SearchResult", "Strategy", "run", "STRATEGIES",
           "make_strategy"]
