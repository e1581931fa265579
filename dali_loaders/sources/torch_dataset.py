"""A source as a torch Dataset: what the torchvision twin iterates."""
from torch.utils.data import Dataset

from .. import transforms


class SourceDataset(Dataset):
    """A source as a torch Dataset: the transform applied to the image torchvision would load."""

    def __init__(self, source, transform):
        self.source, self.transform = source, transform

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, i):
        image = self.source.pil_image(i)
        return transforms.as_tensor(transforms.call_steps(self.transform, image)), int(self.source.labels[i])

    @property
    def fingerprint(self) -> str:
        return self.source.fingerprint

    @property
    def classes(self):
        return getattr(self.source, "classes", None)

    @property
    def skipped(self):
        return dict(getattr(self.source, "skipped", None) or {})
