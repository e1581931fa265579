"""LinearTransformation (v1 and v2; ZCA whitening and the like): each float image flattened in
C x H x W order, the mean subtracted, times the D x D matrix, by our CPU operator
(ops/linear.py). DALI has no product of that size on either device, so a recipe holding it
runs its steps on the CPU under device="gpu" too (loader/build.py's graph_variant)."""
import torch

from ..ops import linear as op
from ._core import Images, Untranslatable, dali_dtype, describe, dtype_after, refuses, translates
from ._placement import on_cpu


def linear_refusal(step) -> str:
    if step.transformation_matrix.device.type != "cpu":
        return (f"the matrix is on {step.transformation_matrix.device}; the loader's steps read a CPU "
                f"tensor (torchvision refuses the mix too)")
    if not op.usable():
        return "needs the augmentation plugin (our C++ operators), which is not built here"
    return ""


def _dtype_after(step, dtype: torch.dtype) -> torch.dtype:
    """torch's: (x - mean) promotes the image's float type with the mean's."""
    return torch.promote_types(dtype, step.mean_vector.dtype)


@translates("LinearTransformation")
@refuses(linear_refusal)
@dtype_after(_dtype_after)
@on_cpu
def linear_transformation(step, images: Images) -> None:
    """The product in float32 (a float64 mean and matrix are rounded to it; the loader hands
    the batch over in the promoted type, as torchvision does)."""
    from nvidia.dali import fn, types

    if images.kind == "pil":
        raise Untranslatable(f"{describe(step)} takes tensors, and here the image is a PIL image (torchvision "
                             f"refuses it too); put ToImage and ToDtype(torch.float32, scale=True) before it")
    if not images.is_float:
        raise Untranslatable(f"{describe(step)} on uint8 images is not translated; put ToDtype(torch.float32, "
                             f"scale=True) or ToTensor before it, as whitening recipes do")
    images.materialize()
    if images.data.device != "cpu":
        raise Untranslatable(f"{describe(step)} runs on the CPU: build the loader's graph with its steps there "
                             f"(device='cpu', or device='gpu', which does so for this recipe)")
    matrix = step.transformation_matrix.detach().to(torch.float32).numpy()
    mean = step.mean_vector.detach().to(torch.float32).numpy()
    if dali_dtype(images.dtype) != types.FLOAT:   # float16 images: torch computes in the mean's type
        images.data = fn.cast(images.data, dtype=types.FLOAT)
    images.data = op.linear(images.data, matrix, mean)
    images.dtype = _dtype_after(step, images.dtype)
