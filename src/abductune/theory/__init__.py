"""Abduction's reasoning, as pure functions and typed records (no torch, no triton).

    diag = diagnose(measurement, problem, space)          # why is this config as fast as it is?
    for h in hypotheses(diag, problem, space, config):    # what should be tried, best first
        ...
    # spaces without roles (public Kernel Tuner data): learn what matters from measurements
    imp = importance(space, measurements); inter = interactions(space, measurements)
    moves = generic_moves(space, incumbent, imp, inter, k=8)
"""
from .diagnose import Diagnosis, diagnose
from .generic import generic_moves, importance, interactions
from .library import LIBRARY, Hypothesis, Theory, hypotheses

__all__ = ["LIBRARY", "Diagnosis", "Hypothesis", "Theory", "diagnose", "generic_moves", "hypotheses",
           "importance", "interactions"]
