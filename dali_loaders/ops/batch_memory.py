"""Where a user's batch code gets its memory: torch's CPU allocator swapped, for the length of
the call, for one that keeps batch-sized blocks (csrc/batch_memory.cc).

Why: a collate_fn such as torchvision's reference `mixup_cutmix(*default_collate(batch))` makes
new batch-sized tensors every batch (MixUp: the rolled batch and a product; CutMix: a clone and
the rolled batch). torch asks glibc for each, glibc maps anything over 32 MiB afresh from the
kernel, and the kernel hands it out one zeroed 4 KB page at a time: 18,800 page faults and about
30 ms of system time a call for a 64 x 3 x 224 x 224 float32 batch on a 2-core machine, more
than the mixing's own arithmetic. No setting reaches it from a loader: torch reads its
THP_MEM_ALLOC_ENABLE before its first tensor, and glibc's mmap threshold is the process's.

So while the loader runs a collate_fn (or a batch_transform callable), blocks of 2 MB or more
are kept when freed, up to four of them (1 GiB in all), and handed out again for the same size:
in a steady loop the batches' tensors cost no fresh pages at all. Nothing else changes: the
tensors are ordinary CPU tensors, 64-byte aligned as torch's, each with its own deleter (freed
anywhere, any time later), and torch's allocator is put back when the call returns (other
threads that allocate meanwhile get such blocks too, which is harmless). Where torch holds an
allocator of higher priority than its default, it is left alone. Costs: up to four freed blocks
stay kept (1 GiB at most); torch's memory profiler does not see allocations made during the call.

The library is compiled on first use against the installed torch (its C++ allocator interface
is not ABI-stable), into the plugins' cache, in about a second. Without a compiler, on another
OS, or with DALI_LOADERS_NO_BATCH_MEMORY=1, batch code runs with torch's allocator as it is.
"""
import contextlib
import ctypes
import hashlib
import os
import platform
import sys
import threading
import warnings
from typing import Optional, Tuple

from . import plugin

DISABLE_ENV = "DALI_LOADERS_NO_BATCH_MEMORY"
SOURCE = os.path.join(plugin.SOURCE_DIR, "batch_memory.cc")
FILE = "libdali_loaders_batch_memory.so"
PRIORITY = 0   # torch's own default CPU allocator's: a higher one set by someone else stays

_lock = threading.Lock()
_state: dict = {}    # "library": the loaded CDLL, or "why": the reason there is none
_depth = 0           # calls inside allocations() now, over all threads
_previous = None     # torch's allocator before the outermost of them


def disabled() -> bool:
    return plugin.flag(DISABLE_ENV)


def _torch_folders() -> Tuple[str, str]:
    """(torch's C++ headers, its libraries)."""
    import torch

    root = os.path.dirname(os.path.abspath(torch.__file__))
    return os.path.join(root, "include"), os.path.join(root, "lib")


def _commands(compiler: str, work: str):
    import torch

    include, lib = _torch_folders()
    abi = int(torch.compiled_with_cxx11_abi())
    return [[compiler, "-std=c++17", "-O2", "-fPIC", "-shared", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
             "-isystem", include, SOURCE, "-o", os.path.join(work, FILE), "-L", lib, "-lc10", f"-Wl,-rpath,{lib}",
             "-lpthread"]]


def _folder(compiler: str) -> str:
    """The build's cache folder: named by the source, the command, torch's version and its
    libc10 (a reinstalled torch builds its own)."""
    import torch

    digest = hashlib.sha256()
    with open(SOURCE, "rb") as f:
        digest.update(f.read())
    c10 = os.path.join(_torch_folders()[1], "libc10.so")
    stat = os.stat(c10) if os.path.exists(c10) else None
    digest.update(repr((_commands(compiler, "FOLDER"), torch.__version__, stat and (stat.st_size, stat.st_mtime_ns),
                        platform.machine())).encode())
    return os.path.join(plugin.cache_root(), f"torch-{torch.__version__}-{digest.hexdigest()[:16]}")


def build() -> Tuple[str, bool]:
    """(the compiled library's path, whether this call compiled it), or plugin.Unavailable."""
    if not sys.platform.startswith("linux"):
        raise plugin.Unavailable("built for Linux only")
    compiler = plugin.compiler()
    return plugin.compile_once(_folder(compiler), FILE, lambda work: _commands(compiler, work))


def _library() -> Optional[ctypes.CDLL]:
    """The loaded library, or None (why: said once, as a warning)."""
    with _lock:
        if "library" not in _state and "why" not in _state:
            try:
                library = ctypes.CDLL(build()[0])
            except (plugin.Unavailable, OSError) as e:
                _state["why"] = str(e)
                warnings.warn(f"dali_loaders: collate_fn and batch_transform callables run with torch's own CPU "
                              f"allocator ({e}): batch-sized tensors they make cost fresh pages every batch",
                              RuntimeWarning, stacklevel=4)
            else:
                for name in ("dali_loaders_cpu_allocator", "dali_loaders_batch_memory"):
                    getattr(library, name).restype = ctypes.c_void_p
                library.dali_loaders_set_cpu_allocator.argtypes = [ctypes.c_void_p, ctypes.c_ubyte]
                library.dali_loaders_release_kept.restype = ctypes.c_size_t
                _state["library"] = library
        return _state.get("library")


@contextlib.contextmanager
def allocations():
    """torch's CPU tensors made meanwhile, in any thread, come from the batch memory (see the
    module); calls may nest and overlap across threads: the outermost puts torch's back."""
    global _depth, _previous
    library = None if disabled() else _library()
    if library is None:
        yield
        return
    with _lock:
        if _depth == 0:
            before = library.dali_loaders_cpu_allocator()
            if not library.dali_loaders_set_cpu_allocator(None, PRIORITY):
                before = None   # an allocator of higher priority is torch's: leave it
            _previous = before
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _previous is not None:
                library.dali_loaders_set_cpu_allocator(_previous, PRIORITY)
                _previous = None


def active() -> bool:
    """Whether torch's CPU allocator is the batch memory now."""
    library = _state.get("library")
    return library is not None and library.dali_loaders_cpu_allocator() == library.dali_loaders_batch_memory()


def kept_blocks() -> Tuple[int, int]:
    """(freed blocks kept, large blocks out now), 0s without the library: for tests."""
    library = _state.get("library")
    if library is None:
        return 0, 0
    kept, out = ctypes.c_size_t(), ctypes.c_size_t()
    library.dali_loaders_batch_memory_counts(ctypes.byref(kept), ctypes.byref(out))
    return kept.value, out.value


def forget() -> None:
    """Tests: the next allocations() decides afresh (a library once loaded stays loaded)."""
    with _lock:
        _state.clear()


def release_kept() -> int:
    """Frees the kept blocks; returns the bytes they held."""
    library = _state.get("library")
    return int(library.dali_loaders_release_kept()) if library is not None else 0
