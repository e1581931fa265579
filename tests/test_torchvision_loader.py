"""torchvision's (and timm's) own dataset objects through the DALI loader: the batches
torch's DataLoader gives over the same object, its own transform run inside DALI. A torchvision
v1 (PIL) recipe: equal up to float rounding; a v2 tensor recipe: within one grey level.
torchvision's md5 checks are patched out, as in test_torchvision_adapters.py."""
import numpy as np
import pytest
import torch
import torchvision.datasets as tvd
from cifar_data import index_images, write_cifar
from dataset_data import (
    write_aircraft,
    write_caltech101,
    write_caltech256,
    write_celeba,
    write_country211,
    write_dtd,
    write_eurosat,
    write_flowers,
    write_food,
    write_gtsrb,
    write_imagenette,
    write_inaturalist,
    write_mnist,
    write_pets,
    write_places365,
    write_rendered_sst2,
    write_stanford_cars,
    write_stl10,
    write_sun397,
    write_svhn,
)
from image_data import write_image_folder
from torchvision import transforms as T
from torchvision.transforms import v2

import dali_loaders
from dali_loaders.sources.torchvision import adapt

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BATCH = 8
RGB_MEAN, RGB_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
GREY_MEAN, GREY_STD = (0.1307,), (0.3081,)


@pytest.fixture(autouse=True)
def no_md5_checks(monkeypatch):
    for cls in (tvd.CIFAR10, tvd.SVHN, tvd.STL10, tvd.Flowers102, tvd.Places365, tvd.CelebA):
        monkeypatch.setattr(cls, "_check_integrity", lambda self, *args: True)
    monkeypatch.setattr(tvd.cifar, "check_integrity", lambda *args, **kwargs: True)


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    def made(name, write):
        return write(str(tmp_path_factory.mktemp(name)))

    return {
        "folder": made("folder", lambda r: write_image_folder(r, {"a": 7, "b": 6, "c": 5}) and r),
        "cifar10": made("cifar10", lambda r: write_cifar(r, "cifar10", n_train=4, n_test=21, images=index_images)),
        "mnist": made("mnist", lambda r: write_mnist(r, "MNIST", n_train=19, n_test=3)),
        "cifar100": made("cifar100", lambda r: write_cifar(r, "cifar100", n_train=17, n_test=2)),
        "fashion": made("fashion", lambda r: write_mnist(r, "FashionMNIST", n_train=3, n_test=17)),
        "svhn": made("svhn", lambda r: write_svhn(r, (("train", 4), ("test", 18)))),
        "stl10": made("stl10", lambda r: write_stl10(r, n_train=4, n_test=17, n_unlabeled=1)),
        "food": made("food", lambda r: write_food(r, per_class=9)),
        "flowers": made("flowers", lambda r: write_flowers(r, n=30)),
        "pets": made("pets", write_pets),
        "dtd": made("dtd", write_dtd),
        "aircraft": made("aircraft", write_aircraft),
        "sun397": made("sun397", write_sun397),
        "cars": made("cars", write_stanford_cars),
        "imagenette": made("imagenette", write_imagenette),
        "sst2": made("sst2", write_rendered_sst2),
        "gtsrb": made("gtsrb", write_gtsrb),
        "country211": made("country211", write_country211),
        "eurosat": made("eurosat", write_eurosat),
        "places": made("places", write_places365),
        "celeba": made("celeba", write_celeba),
        "inat": made("inat", write_inaturalist),
        "caltech101": made("caltech101", write_caltech101),
        "caltech256": made("caltech256", write_caltech256),
    }


def v1(mean, std):
    return T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor(), T.Normalize(mean, std)])


def v2_tensor(mean, std):
    return v2.Compose([v2.ToImage(), v2.Resize(40), v2.CenterCrop(32), v2.ToDtype(torch.float32, scale=True),
                       v2.Normalize(mean, std)])


# name -> dataset (from the roots and a transform), mean, std
DATASETS = {
    "ImageFolder": (lambda r, t: tvd.ImageFolder(r["folder"], transform=t), RGB_MEAN, RGB_STD),
    "CIFAR10": (lambda r, t: tvd.CIFAR10(r["cifar10"], train=False, transform=t), RGB_MEAN, RGB_STD),
    "MNIST": (lambda r, t: tvd.MNIST(r["mnist"], train=True, transform=t), GREY_MEAN, GREY_STD),
    "CIFAR100": (lambda r, t: tvd.CIFAR100(r["cifar100"], train=True, transform=t), RGB_MEAN, RGB_STD),
    "FashionMNIST": (lambda r, t: tvd.FashionMNIST(r["fashion"], train=False, transform=t), GREY_MEAN, GREY_STD),
    "SVHN": (lambda r, t: tvd.SVHN(r["svhn"], "test", transform=t), RGB_MEAN, RGB_STD),
    "STL10": (lambda r, t: tvd.STL10(r["stl10"], "test", transform=t), RGB_MEAN, RGB_STD),
    "Food101": (lambda r, t: tvd.Food101(r["food"], "train", transform=t), RGB_MEAN, RGB_STD),
    "Flowers102": (lambda r, t: tvd.Flowers102(r["flowers"], "test", transform=t), RGB_MEAN, RGB_STD),
    "OxfordIIITPet": (lambda r, t: tvd.OxfordIIITPet(r["pets"], "trainval", transform=t), RGB_MEAN, RGB_STD),
    "DTD": (lambda r, t: tvd.DTD(r["dtd"], "test", transform=t), RGB_MEAN, RGB_STD),
    "FGVCAircraft": (lambda r, t: tvd.FGVCAircraft(r["aircraft"], "train", transform=t), RGB_MEAN, RGB_STD),
    "SUN397": (lambda r, t: tvd.SUN397(r["sun397"], transform=t), RGB_MEAN, RGB_STD),
    "StanfordCars": (lambda r, t: tvd.StanfordCars(r["cars"], "train", transform=t), RGB_MEAN, RGB_STD),
    "Imagenette": (lambda r, t: tvd.Imagenette(r["imagenette"], "train", transform=t), RGB_MEAN, RGB_STD),
    "RenderedSST2": (lambda r, t: tvd.RenderedSST2(r["sst2"], "test", transform=t), RGB_MEAN, RGB_STD),
    "GTSRB": (lambda r, t: tvd.GTSRB(r["gtsrb"], "train", transform=t), RGB_MEAN, RGB_STD),
    "Country211": (lambda r, t: tvd.Country211(r["country211"], "valid", transform=t), RGB_MEAN, RGB_STD),
    "EuroSAT": (lambda r, t: tvd.EuroSAT(r["eurosat"], transform=t), RGB_MEAN, RGB_STD),
    "Places365": (lambda r, t: tvd.Places365(r["places"], "val", small=True, transform=t), RGB_MEAN, RGB_STD),
    "CelebA-attr": (lambda r, t: tvd.CelebA(r["celeba"], "train", transform=t), RGB_MEAN, RGB_STD),
    "CelebA-identity": (lambda r, t: tvd.CelebA(r["celeba"], "valid", "identity", transform=t), RGB_MEAN, RGB_STD),
    "INaturalist-2021": (lambda r, t: tvd.INaturalist(r["inat"], "2021_valid", "genus", transform=t), RGB_MEAN, RGB_STD),
    "INaturalist-2019": (lambda r, t: tvd.INaturalist(r["inat"], "2019", "full", transform=t, loader=tvd.folder.pil_loader),
                         RGB_MEAN, RGB_STD),
    "Caltech101": (lambda r, t: tvd.Caltech101(r["caltech101"], transform=t), RGB_MEAN, RGB_STD),
    "Caltech256": (lambda r, t: tvd.Caltech256(r["caltech256"], transform=t), RGB_MEAN, RGB_STD),
}


def dali_loader(dataset, **kwargs):
    return dali_loaders.DaliLoader(dataset, batch_size=BATCH, shuffle=False, **kwargs)


def assert_same_batches(dataset, tolerance, route="dali", **kwargs):
    """DaliLoader(dataset) and DataLoader(dataset), both unshuffled: every batch, its labels
    equal and its images within `tolerance`; returns the number of batches."""
    ours = dali_loader(dataset, **kwargs)
    assert ours.route.startswith(route), ours.route
    theirs = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False)
    assert len(ours) == len(theirs) == -(-len(dataset) // BATCH)
    batches = 0
    for (images, labels), (expected, expected_labels) in zip(ours, theirs, strict=True):
        assert torch.equal(labels.cpu(), expected_labels), f"batch {batches}"
        assert images.dtype == expected.dtype and images.shape == expected.shape, f"batch {batches}"
        difference = (images.cpu() - expected).abs().max().item()
        assert difference <= tolerance, f"batch {batches}: {difference}"
        batches += 1
    return batches


@pytest.mark.parametrize("name", list(DATASETS))
def test_a_v1_pil_recipe_gives_dataloaders_batches(roots, name):
    make, mean, std = DATASETS[name]
    dataset = make(roots, v1(mean, std))
    assert adapt(dataset).source is not None   # read as a source, not through __getitem__
    assert assert_same_batches(dataset, 1e-5) > 1


@pytest.mark.parametrize("name", list(DATASETS))
def test_a_v2_tensor_recipe_within_a_grey_level(roots, name):
    make, mean, std = DATASETS[name]
    assert assert_same_batches(make(roots, v2_tensor(mean, std)), 1 / 255 / min(std) + 1e-5) > 1


def test_the_target_transform_is_the_datasets(roots):
    dataset = tvd.CIFAR10(roots["cifar10"], train=False, transform=v1(RGB_MEAN, RGB_STD),
                          target_transform=lambda y: 10 * y + 3)
    assert assert_same_batches(dataset, 1e-5) > 1


@pytest.mark.parametrize("name", ["OxfordIIITPet", "Places365"])
def test_the_transform_is_the_one_its_getitem_applies(roots, name):
    """OxfordIIITPet's and Places365's __getitem__ call the transform they were built with
    (their joint `transforms`), not one set on `.transform` afterwards: DataLoader's batches
    say which."""
    dataset = DATASETS[name][0](roots, v1(RGB_MEAN, RGB_STD))
    dataset.transform = v2.Compose([v2.ToImage(), v2.Resize(24), v2.CenterCrop(16),
                                    v2.ToDtype(torch.float32, scale=True)])
    assert assert_same_batches(dataset, 1e-5) > 1


def test_a_dataset_it_cannot_read_still_gives_dataloaders_batches(roots):
    """A custom loader: the Python path (the dataset's own __getitem__)."""
    from PIL import Image

    dataset = tvd.ImageFolder(roots["folder"], transform=v1(GREY_MEAN, GREY_STD),
                              loader=lambda path: Image.open(path).convert("L"))
    assert adapt(dataset).source is None
    with pytest.warns(UserWarning, match="Python path.*ImageFolder: its loader"):
        assert assert_same_batches(dataset, 1e-5, route="python: ImageFolder: its loader") > 1


def test_several_target_types_take_the_python_path_with_dataloaders_tuples(roots):
    dataset = tvd.INaturalist(roots["inat"], "2021_valid", ["full", "kingdom"], transform=v1(RGB_MEAN, RGB_STD))
    assert "gives a tuple per sample" in adapt(dataset).why
    with pytest.warns(UserWarning, match="Python path.*INaturalist: its target_type"):
        batches = list(dali_loader(dataset))
    (full, kingdom), theirs = batches[0][1], next(iter(torch.utils.data.DataLoader(dataset, BATCH)))[1]
    assert torch.equal(full, theirs[0]) and torch.equal(kingdom, theirs[1])


def test_a_grey_caltech_file_is_read_as_the_rgb_recipes_convert_it(tmp_path):
    """Caltech101 hands a grey JPEG over as an "L" image, which DataLoader's RGB recipe cannot
    normalize; Caltech recipes convert it first. The DALI loader reads it as RGB: its batches
    with the plain recipe are DataLoader's with the convert, and the convert in the recipe
    changes nothing."""
    from PIL import Image

    write_caltech101(str(tmp_path), grey=("airplanes", 2))
    plain = tvd.Caltech101(str(tmp_path), transform=v1(RGB_MEAN, RGB_STD))
    assert Image.open(plain.root + "/101_ObjectCategories/airplanes/image_0002.jpg").mode == "L"
    with pytest.raises(RuntimeError):   # torchvision's own batches: the grey image is refused
        list(torch.utils.data.DataLoader(plain, batch_size=BATCH))
    converted = tvd.Caltech101(str(tmp_path), transform=T.Compose([T.Lambda(lambda image: image.convert("RGB")),
                                                                   v1(RGB_MEAN, RGB_STD)]))
    expected = list(torch.utils.data.DataLoader(converted, batch_size=BATCH))
    for dataset in (plain, converted):
        loader = dali_loader(dataset)
        assert loader.route.startswith("dali"), loader.route
        ours = list(loader)
        assert len(ours) == len(expected) > 1
        for (images, labels), (their_images, their_labels) in zip(ours, expected):
            assert torch.equal(labels, their_labels)
            assert (images - their_images).abs().max().item() <= 1e-5


def test_caltech101_annotations_take_the_python_path(tmp_path):
    write_caltech101(str(tmp_path))
    dataset = tvd.Caltech101(str(tmp_path), ["category", "annotation"], transform=v1(RGB_MEAN, RGB_STD))
    assert "annotations are read per sample" in adapt(dataset).why


def test_timm_image_dataset(roots):
    timm_data = pytest.importorskip("timm.data")
    dataset = timm_data.ImageDataset(roots["folder"], transform=v1(RGB_MEAN, RGB_STD))
    assert adapt(dataset).source is not None
    assert assert_same_batches(dataset, 1e-5) > 1


def test_images_that_say_their_index_come_in_dataloaders_order(roots):
    """CIFAR images carry their index: unshuffled, batch k holds samples 8k .. 8k+7."""
    dataset = tvd.CIFAR10(roots["cifar10"], train=False, transform=T.PILToTensor())
    seen = []
    for images, _ in dali_loader(dataset):
        pixels = images[:, :, 0, 0].long()
        seen += ((pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]).tolist()
    assert seen == list(range(4, 4 + len(dataset)))


def test_shuffled_epochs_read_every_sample_once(roots):
    dataset = tvd.CIFAR10(roots["cifar10"], train=False, transform=T.PILToTensor(),
                          target_transform=lambda y: y + 100)
    loader = dali_loaders.DaliLoader(dataset, batch_size=BATCH, shuffle=True, seed=3)
    epochs = []
    for _ in range(2):
        seen, labels = [], []
        for images, y in loader:
            pixels = images[:, :, 0, 0].long()
            seen += ((pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]).tolist()
            labels += y.tolist()
        assert sorted(seen) == list(range(4, 4 + len(dataset)))
        assert labels == [i % 10 + 100 for i in seen]   # each image with its own label
        epochs.append(seen)
    assert epochs[0] != epochs[1]


def test_an_undecodable_file_of_an_image_folder_is_named(tmp_path):
    from image_data import write_garbage

    from dali_loaders import ImageDecodeError

    write_image_folder(str(tmp_path), {"a": 5, "b": 5})
    broken = write_garbage(str(tmp_path / "b" / "zz_broken.jpg"))
    dataset = tvd.ImageFolder(str(tmp_path), transform=v1(RGB_MEAN, RGB_STD))
    with pytest.raises(ImageDecodeError, match="zz_broken.jpg") as raised:
        for _ in dali_loader(dataset):
            pass
    assert raised.value.path == broken


def test_files_from_strangers_in_a_torchvision_imagefolder_are_screened_on_both_loaders(tmp_path):
    """A PNG whose header claims 10^10 pixels (a few hundred bytes) and a truncated JPEG, in the
    user's own ImageFolder: refused by name before any decode, or left out with on_error="skip"."""
    from image_data import write_truncated
    from PIL import Image

    from dali_loaders.testing.untrusted import huge_png, write_bytes

    for name in ("cat", "dog"):
        (tmp_path / name).mkdir()
        for k in range(3):
            Image.new("RGB", (20, 16), (40 * k, 90, 200)).save(tmp_path / name / f"{k}.jpg")
    write_bytes(str(tmp_path / "cat" / "zz_bomb.png"), huge_png(100_000, 100_000))
    write_truncated(str(tmp_path / "dog" / "zz_cut.jpg"))
    recipe = T.Compose([T.Resize((8, 8)), T.ToTensor()])
    with pytest.raises(Exception, match="zz_bomb.png"):
        dali_loaders.DaliLoader(tvd.ImageFolder(str(tmp_path), transform=recipe), 4, device="cpu")
    for make in (dali_loaders.DaliLoader, dali_loaders.TorchLoader):
        kwargs = dict(device="cpu") if make is dali_loaders.DaliLoader else {}
        loader = make(tvd.ImageFolder(str(tmp_path), transform=recipe), 4, on_error="skip", **kwargs)
        with pytest.warns(UserWarning, match="left out"):
            labels = torch.cat([y for _, y in loader]).tolist()
        assert sorted(labels) == [0, 0, 0, 1, 1, 1], make.__name__
        assert {p.rsplit("/", 1)[1] for p in loader.skipped} == {"zz_bomb.png", "zz_cut.jpg"}, make.__name__


def cifar_ids(images) -> list:
    pixels = images[:, :, 0, 0].long()
    return ((pixels[:, 0] << 16) | (pixels[:, 1] << 8) | pixels[:, 2]).tolist()


@pytest.mark.parametrize("name", ["ImageFolder", "CIFAR10", "MNIST", "Food101"])
def test_random_splits_are_read_by_dali_and_give_dataloaders_batches(roots, name):
    """torch's random_split parts (Subsets) of a dataset the library reads: DALI, the
    Subset's samples in its order, the dataset's own transform."""
    make, mean, std = DATASETS[name]
    parts = torch.utils.data.random_split(make(roots, v1(mean, std)), [0.6, 0.4],
                                          generator=torch.Generator().manual_seed(0))
    for part in parts:
        assert adapt(part).source is not None
        assert assert_same_batches(part, 1e-5) >= 1


def test_a_subset_of_a_subset_with_negative_indices_keeps_each_image_with_its_label(roots):
    dataset = tvd.CIFAR10(roots["cifar10"], train=False, transform=T.PILToTensor(),
                          target_transform=lambda y: y + 100)
    outer = torch.utils.data.Subset(dataset, [20, 3, 3, -1, 0, 7, 11, 15, 2, 9])
    inner = torch.utils.data.Subset(outer, torch.tensor([9, 0, 2, 5, -2, 1]))
    expected = [4 + i for i in (9, 20, 3, 7, 2, 3)]   # CIFAR's val images say 4 + their index
    seen, labels = [], []
    for images, y in dali_loaders.DaliLoader(inner, batch_size=4):
        seen += cifar_ids(images)
        labels += y.tolist()
    assert seen == expected and labels == [i % 10 + 100 for i in expected]
    shuffled = dali_loaders.DaliLoader(inner, batch_size=4, shuffle=True, seed=1)
    assert shuffled.route == "dali"
    assert sorted(i for images, _ in shuffled for i in cifar_ids(images)) == sorted(expected)


def test_a_subset_of_a_library_source_takes_transform(roots):
    from dali_loaders.sources import ArraySource

    images = np.zeros((12, 8, 8, 3), dtype=np.uint8)
    images[:, 0, 0, 2] = np.arange(12)
    source = ArraySource(images, np.arange(12) % 3, "made")
    part = torch.utils.data.Subset(source, [11, 4, 7])
    loader = dali_loaders.DaliLoader(part, batch_size=3, transform=v2.ToImage())
    assert loader.route == "dali"
    (batch, labels), = list(loader)
    assert batch[:, 2, 0, 0].tolist() == [11, 4, 7] and labels.tolist() == [2, 1, 1]
    nested = torch.utils.data.Subset(part, np.array([2, 0]))   # and the twin, which reads it as a source
    (batch, labels), = list(dali_loaders.TorchLoader(nested, batch_size=2, transform=v2.ToImage()))
    assert batch[:, 2, 0, 0].tolist() == [7, 11] and labels.tolist() == [1, 2]


def test_a_subset_it_cannot_read_takes_the_python_path_and_says_why(roots):
    from PIL import Image

    dataset = tvd.ImageFolder(roots["folder"], transform=v1(GREY_MEAN, GREY_STD),
                              loader=lambda path: Image.open(path).convert("L"))
    with pytest.warns(UserWarning, match="Python path.*a Subset of ImageFolder: its loader"):
        assert assert_same_batches(torch.utils.data.Subset(dataset, [3, 1, 4, 1, 5, 9, 2, 6, 5]), 1e-5,
                                   route="python: a Subset of ImageFolder") >= 1
    beyond = torch.utils.data.Subset(tvd.CIFAR10(roots["cifar10"], train=False), [0, 21])
    assert adapt(beyond).why == "a Subset: its indices reach past the dataset's 21 samples"
