"""Seeds: a fresh one when the user gives none (from torch's generator), and 31-bit seeds mixed from several integers
(for DALI pipelines, per-batch mixing draws, per-sample Python steps)."""
import numpy as np


def random_seed(generator=None) -> int:
    """A seed drawn from `generator` (torch's global one if None), as DataLoader's RandomSampler
    and worker seeds are: torch.manual_seed(n) (or a generator seeded alike) before the loader's
    first pass makes its order reproducible."""
    import torch

    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item()) & 0x7FFFFFFF


def derived_seed(*parts: int) -> int:
    """A 31-bit seed mixed from several integers (DALI takes a non-negative int)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] >> 1)
