"""A folder dataset's `loader=` written as a copy of torchvision's pil_loader (repos copy it, or
write it in one line) is read as files: the same samples, labels and pixels as torchvision's
own __getitem__; any other loader keeps the Python path and says why."""
import os

import pytest
import torch
import torchvision.datasets as tvd
from image_data import write_image_folder, write_odd_formats
from PIL import Image
from torchvision import transforms as T

from dali_loaders import DaliLoader
from dali_loaders.sources.pil_loaders import reads_as_pil_loader
from dali_loaders.sources.torchvision import adapt


def copied_pil_loader(path):
    # open path as file to avoid ResourceWarning
    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("RGB")


def one_line_loader(path):
    """Opens an image as RGB."""
    return Image.open(path).convert("RGB")


def with_one_line(image_path):
    with open(image_path, "rb") as handle:
        return Image.open(handle).convert("RGB")


def assigned(path):
    image = Image.open(path)
    return image.convert("RGB")


def grey(path):
    return Image.open(path).convert("L")


def no_convert(path):
    return Image.open(path)


def printing(path):
    print(path)
    return Image.open(path).convert("RGB")


def text_mode(path):
    with open(path, "r") as f:
        return Image.open(f).convert("RGB")


def opens_another(path):
    with open(path, "rb") as f:
        return Image.open(path).convert("RGB")


def two_args(path, mode="RGB"):
    return Image.open(path).convert(mode)


class NotPil:
    @staticmethod
    def open(path):
        return Image.open(path).convert("L")


def shadowed(path):
    return Image.open(path).convert("RGB")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("folder"))
    write_image_folder(root, {"cat": 5, "dog": 6, "ant": 4})
    write_odd_formats(os.path.join(root, "odd"))   # grey, CMYK, palette, RGBA, ...: converted to RGB alike
    return root


@pytest.mark.parametrize("loader", [copied_pil_loader, one_line_loader, with_one_line, assigned])
def test_a_copy_of_pil_loader_reads_as_files_with_torchvisions_pixels(root, loader):
    recipe = T.Compose([T.CenterCrop(24), T.PILToTensor()])
    dataset = tvd.ImageFolder(root, transform=recipe, loader=loader)
    assert reads_as_pil_loader(loader) == "" and adapt(dataset).source is not None
    ours = DaliLoader(dataset, batch_size=5, shuffle=False, device="cpu")
    assert ours.route == "dali"
    images, labels = (torch.cat(parts) for parts in zip(*ours))
    expected = [dataset[i] for i in range(len(dataset))]
    assert torch.equal(labels, torch.tensor([target for _, target in expected]))
    assert torch.equal(images, torch.stack([image for image, _ in expected]))


def exec_defined():
    names = {"Image": Image}
    exec("def loader(path):\n    return Image.open(path).convert('RGB')\n", names)
    return names["loader"]


@pytest.mark.parametrize("loader,why", [
    (grey, "does more than"), (no_convert, "does more than"), (printing, "does more than"),
    (text_mode, "does more than"), (opens_another, "does more than"), (two_args, "path alone"),
    (lambda p: Image.open(p).convert("RGB"), "nor a def"), (exec_defined(), "source"),
], ids=["grey", "no convert", "printing", "text mode", "opens another", "two args", "lambda", "exec"])
def test_other_loaders_keep_the_python_path_and_say_why(root, loader, why):
    assert why in reads_as_pil_loader(loader)
    dataset = tvd.ImageFolder(root, loader=loader)
    assert adapt(dataset).source is None and why in adapt(dataset).why


def test_a_name_that_is_not_pils_image_is_not_read(monkeypatch):
    monkeypatch.setitem(shadowed.__globals__, "Image", NotPil)
    assert "not PIL's Image" in reads_as_pil_loader(shadowed)
    monkeypatch.setitem(shadowed.__globals__, "Image", Image)
    monkeypatch.setitem(shadowed.__globals__, "open", lambda *args: None)
    assert "not Python's" in reads_as_pil_loader(shadowed)
