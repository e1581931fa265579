"""Datasets of timm's kind for the create_loader tests."""
import torch
from timm.data import ImageDataset


class Wrapped(torch.utils.data.Dataset):
    """A dataset of the user's, with a `transform` as timm's datasets have: the Python path."""

    def __init__(self, root):
        self.inner = ImageDataset(root)

    @property
    def transform(self):
        return self.inner.transform

    @transform.setter
    def transform(self, transform):
        self.inner.transform = transform

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        return self.inner[i]
