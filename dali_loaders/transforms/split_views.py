"""Views that share their start: one transform's output, then each view's own steps on it.

timm's AugMixDataset is the case in point (its `__getitem__` for the Jensen-Shannon loss):
the dataset's transform crops and flips once, then the "clean" split only normalizes and each
other split augments and normalizes, so every split shows the same window of the image. A
view maker whose views each crop on their own (view_makers.py) draws a window per view;
here the window is drawn once. In the DALI graph the shared steps run once and the views
branch from their output (loader/build.py).
"""
from typing import Any, Optional, Sequence


class SplitViews:
    """`first`, then each of `views` on its output: `[view(first(image)) for view in views]`.

    `first` and each view are a transform, a list of transforms applied in order, or None
    (nothing). The Python call is the recipe's meaning; DALI runs the same steps."""

    def __init__(self, first: Optional[Any], views: Sequence[Any], stacked: bool = False):
        if not len(views):
            raise ValueError("SplitViews: give at least one view")
        self.first = first
        self.views = list(views)
        self.stacked = stacked   # the views as one tensor (views, C, H, W), where True

    def __call__(self, image):
        shared = run(self.first, image)
        views = [run(view, shared) for view in self.views]
        if self.stacked:
            import torch

            return torch.stack(views)
        return views

    def __repr__(self) -> str:
        return f"SplitViews(first={self.first!r}, views={self.views!r}, stacked={self.stacked})"


def run(transform, image):
    """`transform` on `image`: a list of transforms in order; None leaves it as it is."""
    if transform is None:
        return image
    if isinstance(transform, (list, tuple)):
        for step in transform:
            image = run(step, image)
        return image
    return transform(image)
