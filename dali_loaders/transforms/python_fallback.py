"""Steps DALI runs per sample in Python (python_fallback=True), and the twin's way of calling steps."""
import contextlib
import warnings
from typing import Optional

import numpy as np
import torch

from ._core import Images, describe, flatten
from ._plan import Plan, plans_of

# -- steps that DALI runs per sample in Python (python_fallback=True) ----------------------


def is_albumentations(step) -> bool:
    return type(step).__module__.split(".")[0] == "albumentations"


def as_tensor(image) -> torch.Tensor:
    """A step's output as a CHW tensor: PIL and HWC arrays become uint8 CHW, tensors stay."""
    from PIL import Image

    if isinstance(image, Image.Image):
        from torchvision.transforms.functional import pil_to_tensor

        return pil_to_tensor(image)
    if isinstance(image, np.ndarray):
        image = torch.from_numpy(np.ascontiguousarray(image))
        return image[None] if image.dim() == 2 else image.permute(2, 0, 1)
    return image.as_subclass(torch.Tensor) if isinstance(image, torch.Tensor) else image


def call_step(step, image):
    """One step, handed what it expects: Albumentations an HWC uint8 array (its result is the
    "image" of the dict it returns), torchvision what the step before produced."""
    if is_albumentations(step):
        if not isinstance(image, np.ndarray):
            image = as_tensor(image).permute(1, 2, 0).numpy()
        return step(image=image)["image"]
    if isinstance(image, np.ndarray) and type(step).__name__ != "ToTensor":
        image = as_tensor(image)
    return step(image)


def call_steps(transform, image):
    """The twin's application of a transform: each step in turn (as Compose does)."""
    for step in flatten(transform):
        image = call_step(step, image)
    return image


@contextlib.contextmanager
def seeded_globals(seed: int, device: Optional[torch.device] = None):
    """Python's, numpy's and torch's global generators (the CPU's, and `device`'s if a GPU),
    set per sample (or batch) from the loader's seeds, and put back as they were afterwards:
    the training script's own draws (dropout, drop-path, timm's Mixup) come from them and must
    not follow the loader's seeds."""
    import random

    saved = random.getstate(), np.random.get_state(), torch.default_generator.get_state()
    gpus = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device is not None and device.type == "cuda" else []
    random.seed(seed)
    np.random.seed(seed)
    torch.default_generator.manual_seed(seed)
    try:
        with torch.random.fork_rng(devices=gpus, enabled=bool(gpus)):
            for gpu in gpus:
                with torch.cuda.device(gpu):
                    torch.cuda.manual_seed(seed)
            yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.default_generator.set_state(saved[2])


class PythonSteps:
    """The python_function body: the image as the twin would hold it, the steps, the output
    in the loader's layout."""

    def __init__(self, steps, kind: str, layout_in: str, layout_out: str):
        self.steps, self.kind, self.layout_in, self.layout_out = steps, kind, layout_in, layout_out

    def __call__(self, pixels: np.ndarray, seed: np.ndarray) -> np.ndarray:
        seed = int(seed)
        for step in self.steps:
            if hasattr(step, "set_random_seed"):   # Albumentations 2 keeps generators of its own
                step.set_random_seed(seed)
        with seeded_globals(seed):
            image = call_steps(self.steps, self._twin_input(pixels))
        if isinstance(image, (tuple, list)):
            names = ", ".join(describe(step) for step in flatten(self.steps))
            raise TypeError(f"the steps run in Python ({names}) return {len(image)} images a sample, where the "
                            f"loader takes one (or one stacked tensor) from them: after FiveCrop or TenCrop, use "
                            f"only steps that do the same to every crop (v2's conversions, Normalize, Resize, "
                            f"CenterCrop), which the loader runs as views, or stack the crops (torch.stack)")
        out = as_tensor(image)
        if out.dtype == torch.bfloat16:   # numpy has no bfloat16; the loader casts back
            out = out.float()
        if self.layout_out == "HWC" and out.dim() == 3:   # a stack (TenCrop's crops) stays as the steps made it
            out = out.permute(1, 2, 0)
        return np.ascontiguousarray(out.numpy())

    def _twin_input(self, pixels: np.ndarray):
        from PIL import Image

        chw = self.layout_in == "CHW"
        if self.kind == "pil" and pixels.dtype == np.uint8:
            hwc = pixels.transpose(1, 2, 0) if chw else pixels
            return Image.fromarray(hwc[..., 0], "L") if hwc.shape[-1] == 1 else Image.fromarray(hwc)
        tensor = torch.from_numpy(np.array(pixels))
        return tensor if chw else tensor.permute(2, 0, 1)


def run_in_python(steps, images: Images) -> None:
    """The rest of the recipe, per sample in Python inside the pipeline (on the CPU)."""
    from nvidia.dali import fn, types

    layout_out = images.layout
    if images.is_float and not images.materialized:   # the twin holds a float tensor by now
        images.layout = "HWC"
        images.materialize()
    images.flush_mirror()
    layout_in = images.layout if images.materialized else "HWC"
    seeds = fn.random.uniform(range=[0, 2 ** 30], dtype=types.INT32)   # 2**31 - 1 rounds up in float32
    # no layout declared: the steps decide the output's shape (TenCrop's crops stacked are 4-D),
    # and nothing after them in the graph reads a layout (the loader knows its own)
    images.data = fn.python_function(images.data, seeds, function=PythonSteps(steps, images.kind, layout_in,
                                                                               layout_out),
                                     batch_processing=False)
    images.layout, images.materialized = layout_out, True


_warned = set()


def warn_slow(recipe: Plan) -> None:
    """Once per kind of step and process: which step makes the loader slow, and why (a Views'
    first view with Python steps)."""
    recipe = next((view for view in plans_of(recipe) if view.python), None)
    if recipe is None:
        return
    name = describe(recipe.python[0])
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"{recipe.why}: it and the {len(recipe.python) - 1} step(s) after it run per sample in "
                      f"Python inside the DALI pipeline, on the CPU (python_fallback=True). This is much "
                      f"slower than the translated steps", RuntimeWarning, stacklevel=4)
