"""What both loaders say about files a source left out (sources/screening.py, on_error="skip")."""
import warnings
from typing import Dict


def skipped_files(dataset) -> Dict[str, str]:
    """{path (or shard:member): why} of the files the dataset left out; empty if none."""
    return dict(getattr(dataset, "skipped", None) or {})


def warn_skipped(dataset, epoch: int) -> None:
    """One warning per epoch (the epoch in the text, so Python's once-per-message filter
    still shows each), saying how many files are left out and where they are listed."""
    skipped = skipped_files(dataset)
    if skipped:
        first = next(iter(skipped))
        warnings.warn(f"epoch {epoch}: {len(skipped)} broken or refused image file(s) left out "
                      f"(on_error='skip'), the first {first!r} ({skipped[first]}); loader.skipped lists "
                      f"them all", stacklevel=3)
