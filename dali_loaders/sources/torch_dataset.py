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
        made = transforms.call_steps(self.transform, self.source.pil_image(i))
        # a view maker's list: each view a tensor, as the DALI loader gives it
        images = [transforms.as_tensor(view) for view in made] if isinstance(made, (list, tuple)) else \
            transforms.as_tensor(made)
        return images, int(self.source.labels[i])

    @property
    def fingerprint(self) -> str:
        return self.source.fingerprint

    @property
    def classes(self):
        return getattr(self.source, "classes", None)

    @property
    def skipped(self):
        return dict(getattr(self.source, "skipped", None) or {})
