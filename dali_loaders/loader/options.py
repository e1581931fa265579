"""Keywords every factory takes on top of its own: where DALI runs (`device=`, or the original
DataLoaders_DALI's `dali_cpu=`), what a batch looks like (`output=`) and `target_transform=`.
Each factory names them in its signature and hands them to dali_loader() / torch_loader(),
which check them here (a GPU variant without a GPU fails when the loader is built)."""
import numbers
import sys
from dataclasses import dataclass
from typing import Callable, Optional

import torch

# "gpu": mixed (GPU) decode and GPU augmentation; "cpu-decode": CPU decode, GPU augmentation.
DEVICES = ("cpu", "cpu-decode", "gpu")
OUTPUTS = ("tuple", "dict")


@dataclass(frozen=True)
class LoaderOptions:
    device: Optional[str] = None     # None: "gpu" if CUDA is available (and no Accelerator(cpu=True)), else "cpu"
    output: str = "tuple"
    target_transform: Optional[Callable] = None


def torch_device(device, device_id):
    """(device, device_id) with torch's names read as this loader's: torch.device("cpu") or "cpu"
    as "cpu", "cuda" / "cuda:1" / torch.device("cuda", 1) as "gpu" on that GPU (the loader's
    batches land there, as `.to(device)` would put them); anything else as it is."""
    if isinstance(device, torch.device):
        kind, index = device.type, device.index
    elif isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
        try:
            parsed = torch.device(device)
        except RuntimeError:
            return device, device_id   # refused by name in check_options
        kind, index = parsed.type, parsed.index
    else:
        return device, device_id
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: this loader runs on the CPU or on a CUDA GPU")
    if kind == "cpu":
        return "cpu", device_id
    if index is not None and device_id is not None and index != device_id:
        raise ValueError(f"device={device!r} and device_id={device_id!r} name two GPUs; pass one of them")
    return "gpu", index if index is not None else device_id


def check_options(device=None, dali_cpu=None, output="tuple", target_transform=None) -> LoaderOptions:
    """The keywords as LoaderOptions, or a ValueError naming the one that is wrong."""
    if dali_cpu is not None:
        if not isinstance(dali_cpu, bool):
            raise ValueError(f"dali_cpu must be True (everything on the CPU) or False (GPU decode and "
                             f"augmentation), got {dali_cpu!r}")
        mapped = "cpu" if dali_cpu else "gpu"
        if device is not None and device != mapped:
            raise ValueError(f"dali_cpu={dali_cpu} means device={mapped!r}, but device={device!r} was passed "
                             f"too; pass one of them")
        device = mapped
    if device is not None and device not in DEVICES:
        raise ValueError(f"device must be one of {list(DEVICES)} (or torch's 'cuda', 'cuda:N', a torch.device; "
                         f"None: 'gpu' where CUDA is available), got {device!r}")
    if output not in OUTPUTS:
        raise ValueError(f"output must be 'tuple' (images, labels) or 'dict' ([{{'data': images, 'label': "
                         f"labels}}], as DALI's iterators), got {output!r}")
    if target_transform is not None and not callable(target_transform):
        raise ValueError(f"target_transform must be a callable on one label, got {target_transform!r}")
    return LoaderOptions(device, output, target_transform)


def accelerate_device() -> Optional[torch.device]:
    """The device of the process's Accelerator, where a DataLoader it prepares puts its batches;
    None without one (Accelerate not imported, or no Accelerator made)."""
    state = sys.modules.get("accelerate.state")
    if state is None or not state.is_initialized():
        return None
    return state.AcceleratorState().device


def resolve_device(device: Optional[str], device_id: Optional[int]) -> str:
    """The variant to build, or a RuntimeError if it needs a GPU this machine lacks. By default
    the GPU where CUDA is, unless the process's Accelerator keeps the model on the CPU
    (`Accelerator(cpu=True)`), whose batches then stay there too."""
    cuda = torch.cuda.is_available()
    if device is None and device_id is None:
        framework = accelerate_device()
        return "gpu" if cuda and (framework is None or framework.type != "cpu") else "cpu"
    if device == "cpu":
        return "cpu"   # device_id names no GPU then: nothing of the pipeline is on one
    wanted = f"device={device!r}" if device else f"device_id={device_id!r}"
    if not cuda:
        raise RuntimeError(f"{wanted} needs a CUDA GPU, and torch.cuda.is_available() is False on this "
                           f"machine; pass device='cpu' (or dali_cpu=True) to run everything on the CPU")
    exists = isinstance(device_id, numbers.Integral) and 0 <= device_id < torch.cuda.device_count()
    if device_id is not None and not exists:
        raise RuntimeError(f"device_id={device_id!r} names no GPU: this machine has "
                           f"{torch.cuda.device_count()} (0 .. {torch.cuda.device_count() - 1})")
    return device or "gpu"
