"""Seeds: a fresh one when the user gives none, and 31-bit seeds mixed from several integers
(for DALI pipelines, per-batch mixing draws, per-sample Python steps)."""
import numpy as np


def random_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0] >> 1)


def derived_seed(*parts: int) -> int:
    """A 31-bit seed mixed from several integers (DALI takes a non-negative int)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] >> 1)
