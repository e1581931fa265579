"""Your own DALI graph as the recipe's last step: a function of DALI `fn` calls from the
decoded images to the batch's images, run where the translated steps would run.

    from nvidia.dali import fn, types
    from dali_loaders import DaliFunction, get_imagefolder_iter_dali

    def my_graph(images):      # decoded RGB pixels, HWC uint8, on the loader's device
        images = fn.random_resized_crop(images, size=(160, 160))
        return fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), dtype=types.FLOAT,
                                        output_layout="CHW", mean=[124, 116, 104], std=[58, 57, 57])

    loader = get_imagefolder_iter_dali("/data/train", 256, True, transform=DaliFunction(my_graph))

Everything else is the library's: the reader, the decode (GPU or CPU, see device=), epochs,
sharding, set_epoch, state_dict / resume (DALI's random operators are checkpointed) and the
DataLoader manners. Translated torchvision steps may come before it; none may come after.
It has no torchvision twin: a twin (or python_fallback) handed one raises.
"""
from typing import Callable

from ._core import Untranslatable, register, uint8_only


class DaliFunction:
    """`function(images) -> images`, a graph of DALI operators on a batch of decoded images
    (a DataNode, HWC uint8 RGB, on the loader's device); what it returns is the batch."""

    def __init__(self, function: Callable):
        if not callable(function):
            raise TypeError(f"DaliFunction needs a function of DALI operators, got {function!r}")
        self.function = function

    def __call__(self, image):
        raise TypeError(f"DaliFunction({getattr(self.function, '__name__', self.function)}) runs only inside a "
                        f"DALI pipeline: use a get_*_iter_dali factory (the torchvision twins cannot run it)")

    def __repr__(self) -> str:
        return f"DaliFunction({getattr(self.function, '__name__', repr(self.function))})"


@register(DaliFunction)
@uint8_only
def dali_function(step: DaliFunction, images) -> None:
    images.decode()
    images.flush_mirror()
    images.data = step.function(images.data)
    if images.data is None or isinstance(images.data, (tuple, list)):
        raise Untranslatable(f"{step} must return one DataNode (the batch's images), got {images.data!r}")
    images.materialized = True    # the function's output is the batch as it stands: nothing is added to it


dali_function.last = True   # plan() refuses steps after it
