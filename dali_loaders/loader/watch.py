"""What a DaliLoader on the DALI path read from its dataset once, watched epoch by epoch.

Its graph is built from the dataset's transform and its samples as they were when the loader
was made; DataLoader reads both again at every item, so a schedule that changes them between
epochs (progressive resizing, a curriculum, a dataset cut down) would change DataLoader's
batches and not this loader's. Such a change is named at the next epoch's start instead of
being ignored: the recipe and the samples are compared by their repr (a step's parameters
with it) and count, through Subset's and ConcatDataset's layers.
"""
from typing import Dict, Iterator

WATCHED = ("transform", "target_transform")
DEPTH = 4   # layers of Subset / ConcatDataset looked through


def _layers(dataset, depth: int = 0) -> Iterator[tuple]:
    """(where, dataset) of the dataset and the datasets it wraps."""
    yield "the dataset", dataset
    if depth >= DEPTH:
        return
    inner = getattr(dataset, "dataset", None)
    if inner is not None and inner is not dataset:
        for where, layer in _layers(inner, depth + 1):
            yield ("the wrapped dataset" if where == "the dataset" else where), layer
    for k, member in enumerate(getattr(dataset, "datasets", None) or []):
        for where, layer in _layers(member, depth + 1):
            yield f"dataset {k} of the concatenation" if where == "the dataset" else where, layer


def _state(dataset) -> Dict[str, str]:
    state = {}
    for where, layer in _layers(dataset):
        for name in WATCHED:
            if getattr(layer, name, None) is not None:
                state[f"{where}'s {name}"] = repr(getattr(layer, name))
        try:
            state[f"{where}'s number of samples"] = str(len(layer))
        except TypeError:
            pass
    return state


class DatasetWatch:
    """`changes()`: what differs from when the loader was made ("" when nothing does)."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.seen = _state(dataset)

    def changes(self) -> str:
        now = _state(self.dataset)
        changed = [what for what in sorted(set(now) | set(self.seen)) if now.get(what) != self.seen.get(what)]
        return ", ".join(changed)

    def check(self) -> None:
        changed = self.changes()
        if changed:
            raise RuntimeError(f"{changed} changed after the DaliLoader was made: its DALI pipeline runs the recipe "
                               f"and reads the samples the dataset had then (DataLoader would take the new ones at "
                               f"each item); make a new DaliLoader after such a change (one a phase of the schedule)")
