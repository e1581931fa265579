"""torchvision's CelebA on the DALI path, its targets tensors per sample (40 attributes, an
identity, a box, landmarks): DataLoader's batches over the same object with each target type, a
target_transform and a collate_fn handed tensors as torchvision hands them, every image once a
shuffled epoch with its own target, a Subset, the twin, and several target types (a tuple per
sample) on the Python path, saying why."""
import warnings

import pytest
import torch
import torchvision.datasets as tvd
from dataset_data import CELEBA_ATTRIBUTES, write_celeba
from image_data import image_id
from torch.utils.data import DataLoader, Subset, default_collate
from torchvision import transforms as T

from dali_loaders import DaliLoader, TorchLoader
from dali_loaders.loader.resolve import PythonPathNote

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
RECIPE = T.Compose([T.Resize(24), T.CenterCrop(20), T.ToTensor()])


@pytest.fixture(autouse=True)
def no_md5_checks(monkeypatch):   # the files are written here, not the published ones
    monkeypatch.setattr(tvd.CelebA, "_check_integrity", lambda self: True)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_celeba(str(tmp_path_factory.mktemp("celeba")))


def celeba(root, split="all", target_type="attr", **kwargs):
    return tvd.CelebA(root, split, target_type, transform=RECIPE, **kwargs)


def dali(dataset, batch_size=8, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonPathNote)
        loader = DaliLoader(dataset, batch_size, **kwargs)
    assert loader.route == "dali"
    return loader


def assert_dataloaders_batches(loader, dataset, batch_size=8, **kwargs):
    batches = 0
    for (x, y), (u, v) in zip(loader, DataLoader(dataset, batch_size, **kwargs), strict=True):
        assert y.dtype == v.dtype and torch.equal(y, v), f"batch {batches}"
        assert (x - u).abs().max().item() <= 1e-5
        batches += 1
    return batches


@pytest.mark.parametrize("target_type", ["attr", "identity", "bbox", "landmarks"])
def test_each_target_type_gives_dataloaders_batches(root, target_type):
    dataset = celeba(root, "all", target_type)
    assert assert_dataloaders_batches(dali(dataset), dataset) == 4


@pytest.mark.parametrize("target_transform", [lambda t: t.float(), lambda t: t[2], lambda t: int(t.sum())],
                         ids=["float", "one attribute", "an int"])
def test_target_transform_is_handed_each_samples_tensor(root, target_transform):
    """As torchvision calls it: `.float()` and indexing are tensor methods."""
    dataset = celeba(root, "train", target_transform=target_transform)
    assert assert_dataloaders_batches(dali(dataset), dataset) == 2


@pytest.mark.parametrize("target_type", ["attr", "identity"])
def test_a_collate_fn_gets_the_items_dataloader_gives_it(root, target_type):
    seen = []

    def collate(items):
        seen.append([type(label) for _, label in items])
        return default_collate(items)

    dataset = celeba(root, "test", target_type)
    assert assert_dataloaders_batches(dali(dataset, collate_fn=collate), dataset, collate_fn=collate) == 2
    assert {kind for batch in seen for kind in batch} == {torch.Tensor}


def test_a_shuffled_epoch_serves_every_image_once_with_its_own_attributes(root):
    dataset = celeba(root)
    loader = dali(dataset, 6, shuffle=True, seed=2, num_workers=2)
    ids, rows = [], []
    for x, y in loader:
        ids += [image_id(rgb) for rgb in (x.mean(dim=(2, 3)) * 255).tolist()]
        rows += y.tolist()
    assert sorted(ids) == list(range(30)) and ids != list(range(30))
    assert rows == [[(i >> j) & 1 for j in range(len(CELEBA_ATTRIBUTES))] for i in ids]   # write_celeba's bits


def test_a_subset_and_the_twin(root):
    dataset = Subset(celeba(root, "all", "identity"), [29, 3, 17, 8, 0, 11])
    loader = dali(dataset, 4)
    assert assert_dataloaders_batches(loader, dataset, 4) == 2
    assert torch.cat([y for _, y in loader]).tolist() == [1000 + 7 * (i + 1) for i in [29, 3, 17, 8, 0, 11]]
    twin = [y for _, y in TorchLoader(dataset, 4)]
    assert torch.equal(torch.cat(twin), torch.cat([y for _, y in loader]))


def test_several_target_types_take_the_python_path_saying_why(root):
    dataset = celeba(root, "train", ["attr", "identity"])
    with pytest.warns(PythonPathNote, match=r"target_type \['attr', 'identity'\] is not one of"):
        loader = DaliLoader(dataset, 8)
    (x, (attr, identity)), _ = list(loader)
    assert attr.shape == (8, len(CELEBA_ATTRIBUTES)) and identity.shape == (8,)
