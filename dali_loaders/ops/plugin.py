"""Our DALI operators (csrc/): each compiled on first use against the DALI installed now,
cached per DALI build, loaded once per process. Four libraries, built and failing apart:
RESIZE (DaliLoadersResize, PIL's Image.resize), AUGMENT (DaliLoadersAugment, the
per-sample augmentation sequences of the AutoAugment family and ColorJitter, the erase
box and timm rows of GPU graphs, ElasticTransform's maps and sample, ColorJitter on float
images), NORMALIZE
(DaliLoadersNormalize, the CPU graphs' last step: flip, conversion, normalization, layout)
and CHAIN (DaliLoadersChainTail, the GPU chain's pixel stages; its GPU operator is compiled
by nvcc where a GPU and nvcc are, or for DALI_LOADERS_CUDA_ARCH).

Why on first use and not at `pip install`: a DALI plugin is bound to the exact DALI build it
was compiled against (C++ ABI, no stable plugin interface). At install time DALI may be
missing (pip builds in an isolated environment), a wheel built on one machine is installed
next to whatever DALI the target venv resolves, and DALI can be swapped later (cuda12 <->
cuda13 builds of the same version). Compiling the shipped source when the loaders first
need it, into a cache keyed by the DALI build, the sources and the toolchain, is right in
all of these; a second process waits on a lock file and reuses the result.

Whatever goes wrong (no compiler, no CUDA headers, which DALI's headers include, a build or
load error) the loaders use DALI's own operators instead, after one warning per library.
DALI_LOADERS_NO_PLUGIN=1 turns all off, DALI_LOADERS_NO_AUGMENT_PLUGIN=1 the augmentation
operator alone, DALI_LOADERS_NO_NORMALIZE_PLUGIN=1 the normalization one,
DALI_LOADERS_NO_CHAIN_PLUGIN=1 the chain's; CXX picks the
compiler; DALI_LOADERS_CACHE the cache directory (default ~/.cache/dali_loaders);
DALI_LOADERS_CUDA_HOME the CUDA toolkit whose headers to use (default: CUDA_HOME, CUDA_PATH,
nvcc's, /usr/local/cuda): a folder without one means pip's CUDA header packages alone, which
the [cuda12] / [cuda13] extras install, so no toolkit is needed.

Each compile says so on stderr (which library, for which DALI, how long, where it goes);
`python -m dali_loaders build-plugins` builds all three ahead of time (container images).
"""
import ctypes
import glob
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

DISABLE_ENV = "DALI_LOADERS_NO_PLUGIN"
DISABLE_AUGMENT_ENV = "DALI_LOADERS_NO_AUGMENT_PLUGIN"
DISABLE_NORMALIZE_ENV = "DALI_LOADERS_NO_NORMALIZE_PLUGIN"
DISABLE_CHAIN_ENV = "DALI_LOADERS_NO_CHAIN_PLUGIN"
CUDA_ARCH_ENV = "DALI_LOADERS_CUDA_ARCH"   # nvcc's -arch for the GPU operators (default: the GPUs here, "native")
CACHE_ENV = "DALI_LOADERS_CACHE"
CUDA_HOME_ENV = "DALI_LOADERS_CUDA_HOME"
SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
BUILD_TIMEOUT = 900  # seconds: the DALI headers are heavy; a loaded 2-core machine needs ~30 s
USUAL_TIME = "usually 1-2 minutes"   # one library on a busy 2-core machine (the DALI headers); said before a compile
COMMANDS_FILE = "build-commands.txt"   # beside each built library: how it was compiled


@dataclass(frozen=True)
class Library:
    """One plugin: its kernels (compiled alone at -O3), its operator (DALI's headers, -O1)."""
    file: str
    schema: str           # the DALI operator it registers
    function: str         # its name in nvidia.dali.fn
    operators: Tuple[str, ...]   # the sources with the DALI operators
    kernels: Tuple[str, ...]
    headers: Tuple[str, ...]
    kernel_flags: Tuple[str, ...]
    what: str             # for the warning: what is missing, and what is used instead
    instead: str
    disable_env: Optional[str] = None
    gpu_operators: Tuple[str, ...] = ()   # CUDA sources: built with nvcc where it and a GPU are (else left out)

    @property
    def sources(self) -> Tuple[str, ...]:
        return (*self.operators, *self.kernels, *self.headers, *self.gpu_operators)


RESIZE = Library("libdali_loaders_resize.so", "DaliLoadersResize", "dali_loaders_resize", ("resize_op.cc",),
                 ("pil_resample.cc",), ("pil_resample.h", "pil_resample_api.h", "simd.h", "tensor_resample.h"), (),
                 "the PIL-exact resize plugin", "resizing with DALI's fn.resize instead")
# The augmentations' float arithmetic must round one operation at a time (no contraction),
# with explicit fused multiply-adds where torch's vectorized loops use them: in hardware
# when the CPU has FMA (the flag is in the build's key, so another CPU builds its own).
AUGMENT = Library("libdali_loaders_augment.so", "DaliLoadersAugment", "dali_loaders_augment",
                  ("augment_op.cc", "erase_op.cc", "mix_op.cc", "timm_rows_op.cc", "elastic_op.cc", "noise_op.cc",
                   "linear_op.cc", "float_color_op.cc"),
                  ("augment_blur.cc", "augment_color.cc", "augment_geometry.cc", "augment_hue.cc", "erase_fill.cc",
                   "mix_kernels.cc", "elastic_kernels.cc", "normals.cc", "noise_kernels.cc", "linear_kernels.cc",
                   "float_color_kernels.cc"),
                  ("augment_kernels.h", "augment_codes.h", "erase_box.h", "erase_fill.h", "mix_kernels.h",
                   "elastic_kernels.h", "normals.h", "noise_kernels.h", "linear_kernels.h", "float_color_kernels.h", "simd.h"),
                  ("-ffp-contract=off",), "the augmentation plugin",
                  "augmenting with DALI's conditionals and operators instead", DISABLE_AUGMENT_ENV)
NORMALIZE = Library("libdali_loaders_normalize.so", "DaliLoadersNormalize", "dali_loaders_normalize",
                    ("normalize_op.cc",),
                    ("normalize_kernels.cc", "gather_windows.cc", "blend_images.cc", "erase_fill.cc",   # erasing too
                     "normals.cc"),
                    ("normalize_kernels.h", "gather_windows.h", "blend_images.h", "erase_box.h", "erase_fill.h",
                     "normals.h", "simd.h"), ("-ffp-contract=off",),
                    "the normalization plugin", "normalizing with DALI's crop_mirror_normalize instead",
                    DISABLE_NORMALIZE_ENV)
# The AutoAugment family's chain: its pixel stages after a slot's warp in one pass, on the
# GPU where nvcc and a GPU are (CPU alone elsewhere: what the tests compare with DALI's operators)
CHAIN = Library("libdali_loaders_chain.so", "DaliLoadersChainTail", "dali_loaders_chain_tail", ("chain_tail_op.cc",),
                (), ("chain_tail.h", "chain_tail_op.h"), ("-ffp-contract=off",), "the chain plugin",
                "running the chain's stages as DALI's operators instead", DISABLE_CHAIN_ENV, ("chain_tail_op.cu",))
LIBRARIES = (RESIZE, AUGMENT, NORMALIZE, CHAIN)
LIBRARY = RESIZE.file
SOURCES = RESIZE.sources

_lock = threading.Lock()
# "ok" once tried; "why": the failure
_states: Dict[str, dict] = {library.file: {} for library in LIBRARIES}
_state = _states[RESIZE.file]


class Unavailable(RuntimeError):
    """Why the plugin cannot be used here."""


def flag(name: str) -> bool:
    """Whether the environment variable `name` is set to something other than 0 / false."""
    return os.environ.get(name, "").strip() not in ("", "0", "false", "False")


def disabled(library: Library = RESIZE) -> bool:
    names = [DISABLE_ENV] + ([library.disable_env] if library.disable_env else [])
    return any(flag(name) for name in names)


def _not_traced(function):
    """DALI's do_not_convert where DALI is installed: a library is built on first use, often
    while a graph is being defined, and a graph with conditionals has AutoGraph rewrite every
    function it calls (it warned about shutil's, and would slow the build down)."""
    try:
        from nvidia.dali.pipeline import do_not_convert
    except ImportError:
        return function
    return do_not_convert(function)


@_not_traced
def available(library: Library = RESIZE) -> bool:
    """True when the library's operator is loaded into DALI, building it first if needed.
    False when turned off, or when it cannot be built or loaded: then warns, once per process."""
    if disabled(library):
        return False
    state = _states[library.file]
    with _lock:
        if "ok" not in state:
            try:
                state["path"] = build(library)
                load(state["path"], library)
                state["ok"] = True
            except Unavailable as e:
                state.update(ok=False, why=str(e))
                warnings.warn(f"dali_loaders: {library.what} is not available ({e}); {library.instead}",
                              RuntimeWarning, stacklevel=3)
    return state["ok"]


def augment_available() -> bool:
    return available(AUGMENT)


def chain_available() -> bool:
    return available(CHAIN)


def normalize_available() -> bool:
    return available(NORMALIZE)


def loaded_path(library: Library) -> Optional[str]:
    """The file of a library available() has loaded (None if it has not): its plain C
    functions, if any, are called through ctypes (c_function)."""
    state = _states[library.file]
    return state.get("path") if state.get("ok") else None


def c_function(library: Library, name: str, argtypes: list, restype=ctypes.c_int):
    """The plain C function `name` of a library available() has loaded, through ctypes, its
    types set (None if the library is not loaded); looked up once per file."""
    path = loaded_path(library)
    if path is None:
        return None
    key = (path, name)
    if key not in _c_functions:
        function = getattr(ctypes.CDLL(path), name)
        function.argtypes, function.restype = argtypes, restype
        _c_functions[key] = function
    return _c_functions[key]


_c_functions: dict = {}


def forget() -> None:
    """Tests: the next available() decides afresh (a library once loaded stays loaded)."""
    with _lock:
        for state in _states.values():
            state.clear()


def load(path: str, library: Library = RESIZE) -> None:
    from nvidia.dali import fn, plugin_manager

    if hasattr(fn, library.function):
        return
    try:
        plugin_manager.load_library(path)
    except Exception as e:   # a library built for another DALI, a missing symbol
        raise Unavailable(f"loading {path} failed: {e}") from e
    if not hasattr(fn, library.function):
        raise Unavailable(f"{path} did not register {library.schema}")


def build(library: Library = RESIZE, announce: bool = True) -> str:
    """The compiled library for the DALI installed now: from the cache, or compiled into it
    (saying so on stderr first, unless `announce` is False)."""
    return _build(library, announce)[0]


def _build(library: Library, announce: bool) -> Tuple[str, bool]:
    """(the library's path, whether this call compiled it). A library whose GPU operators nvcc
    fails to build (an nvcc too old for -arch=native, a host compiler it refuses) is built for
    the CPU alone, saying so once."""
    try:
        return _build_for(library, announce, gpu=True)
    except Unavailable as e:
        if not _gpu_commands(library, "FOLDER")[0]:
            raise
        warnings.warn(f"dali_loaders: {library.what}'s GPU operator did not compile ({e}); building its CPU "
                      f"operator alone", RuntimeWarning, stacklevel=4)
        return _build_for(library, announce, gpu=False)


def _build_for(library: Library, announce: bool, gpu: bool) -> Tuple[str, bool]:
    cxx = compiler()
    folder = os.path.join(_cache_root(), _key(library, _commands(library, cxx, "FOLDER", gpu)))

    def say():
        if announce:
            print(f"dali_loaders: compiling {library.what} ({library.file}) for DALI {_dali_version()}, once per "
                  f"DALI build: {USUAL_TIME}; cached in {_cache_root()} (set {CACHE_ENV} to move it; "
                  f"`python -m dali_loaders build-plugins` builds all ahead)", file=sys.stderr, flush=True)

    return compile_once(folder, library.file, lambda work: _commands(library, cxx, work, gpu), say)


def compile_once(folder: str, file: str, commands: Callable[[str], List[List[str]]],
                 before: Callable[[], None] = lambda: None) -> Tuple[str, bool]:
    """(folder/file, whether this call compiled it): there already, or made by running
    commands(a work folder), which must write `file` into it. One process compiles, the others
    wait on a lock file and reuse it; a failure is remembered beside it (the same sources and
    toolchain would fail again): Unavailable. `before` runs just before compiling."""
    os.makedirs(folder, exist_ok=True)
    path, failed = os.path.join(folder, file), os.path.join(folder, "failed.log")
    with open(os.path.join(folder, ".lock"), "w") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return path, False
        if os.path.exists(failed):
            raise Unavailable(f"compiling it failed before, see {failed}")
        before()
        work = tempfile.mkdtemp(prefix=".build-", dir=folder)
        try:
            made = commands(work)
            for command in made:
                _compile(command, failed)
            with open(os.path.join(folder, COMMANDS_FILE), "w") as record:
                record.write("\n".join(" ".join(command) for command in made) + "\n")
            os.replace(os.path.join(work, file), path)   # atomic: never half a library
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return path, True


@dataclass(frozen=True)
class Built:
    """What build_all() did for one library: its path, or why it failed."""
    library: Library
    path: Optional[str]
    compiled: bool
    seconds: float
    error: Optional[str] = None


def build_all(libraries: Tuple[Library, ...] = LIBRARIES, workers: Optional[int] = None) -> List[Built]:
    """Builds the libraries in parallel (one compiler at a time per library, up to
    os.cpu_count() of them), without the first-use lines. Raises Unavailable at once when
    there is no compiler; any other failure is reported in its Built."""
    compiler()
    workers = max(1, min(len(libraries), workers or os.cpu_count() or 1))

    def one(library: Library) -> Built:
        start = time.monotonic()
        try:
            path, compiled = _build(library, announce=False)
        except Unavailable as e:
            return Built(library, None, False, time.monotonic() - start, str(e))
        return Built(library, path, compiled, time.monotonic() - start)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dali_loaders-build") as pool:
        return list(pool.map(one, libraries))


def cache_root() -> str:
    """Where the compiled libraries are kept (under DALI_LOADERS_CACHE or ~/.cache/dali_loaders)."""
    return _cache_root()


def _dali_version() -> str:
    import nvidia.dali

    return nvidia.dali.__version__


def _compile(command: List[str], failed: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"running {command[0]} failed: {e}") from e
    if done.returncode != 0:
        with open(failed, "w") as log:
            log.write(" ".join(command) + "\n\n" + done.stderr)
        raise Unavailable(f"compiling it failed, see {failed}")


def compiler() -> str:
    """The C++ compiler's path (CXX, else g++, c++ or clang++), or Unavailable."""
    name = os.environ.get("CXX") or next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), "g++")
    path = shutil.which(name)
    if not path:
        raise Unavailable(f"no C++ compiler ({name!r} not found; set CXX)")
    return path


def _commands(library: Library, compiler: str, work: str, gpu: bool = True) -> List[List[str]]:
    """The kernels at -O3 alone (seconds), then the operator, whose DALI headers take most of
    the time, at -O1 (it only loops over samples), linked with them."""
    import nvidia.dali.sysconfig as dali_config

    arch = ["-march=x86-64-v2"] if platform.machine() in ("x86_64", "AMD64") else []   # AVX2 is picked at run time
    if library is AUGMENT and cpu_has("fma"):
        arch.append("-mfma")
    cuda = [flag for folder in _cuda_includes() for flag in ("-isystem", folder)]
    common = [compiler, "-std=c++17", "-fPIC", "-w", *arch, *dali_config.get_compile_flags(), "-I", SOURCE_DIR]
    objects = [os.path.join(work, name[:-3] + ".o") for name in library.kernels]
    commands = [[*common, "-O3", *library.kernel_flags, "-c", os.path.join(SOURCE_DIR, name), "-o", obj]
                for name, obj in zip(library.kernels, objects)]
    nvcc, runtime = _gpu_commands(library, work) if gpu else ([], [])
    commands += nvcc
    objects += [command[-1] for command in nvcc]
    return commands + [[*common, "-O1", *library.kernel_flags, "-shared", *cuda,
                        *(os.path.join(SOURCE_DIR, name) for name in library.operators), *objects,
                        "-o", os.path.join(work, library.file), *dali_config.get_link_flags(),
                        f"-Wl,-rpath,{dali_config.get_lib_dir()}", *runtime]]


def _gpu_commands(library: Library, work: str) -> Tuple[List[List[str]], List[str]]:
    """nvcc's commands for the library's CUDA sources, and the CUDA runtime to link (static,
    as DALI's plugins link it), where nvcc, its static runtime and a GPU (or DALI_LOADERS_CUDA_ARCH)
    are; else none: the library is built for the CPU alone."""
    import nvidia.dali.sysconfig as dali_config

    home = os.environ.get(CUDA_HOME_ENV)
    nvcc = os.path.join(home, "bin", "nvcc") if home else shutil.which("nvcc")
    nvcc = nvcc if nvcc and os.path.isfile(nvcc) else None
    arch = os.environ.get(CUDA_ARCH_ENV) or ("native" if glob.glob("/dev/nvidia[0-9]*") else None)
    if not library.gpu_operators or not nvcc or not arch:
        return [], []
    lib = next((folder for folder in _runtime_folders(nvcc) if os.path.exists(os.path.join(folder, "libcudart_static.a"))),
               None)
    if lib is None:
        return [], []
    commands = [[nvcc, "-std=c++17", "-O3", "--fmad=false", f"-arch={arch}", "-w", "-Xcompiler",
                 "-fPIC,-ffp-contract=off", *dali_config.get_compile_flags(), "-I", SOURCE_DIR, "-c",
                 os.path.join(SOURCE_DIR, name), "-o", os.path.join(work, name[:-3] + "_cu.o")]
                for name in library.gpu_operators]
    return commands, ["-L", lib, "-lcudart_static", "-ldl", "-lrt", "-lpthread"]


def _runtime_folders(nvcc: str) -> List[str]:
    """Where the CUDA runtime's libraries may be: beside nvcc's toolkit, then the toolkits
    whose headers the build would use."""
    toolkits = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))]
    toolkits += [os.path.dirname(folder) for folder in _toolkit_includes()]
    return [os.path.join(toolkit, lib) for toolkit in toolkits for lib in ("lib64", os.path.join("targets", "x86_64-linux", "lib"))]


def gpu_operator_loaded(schema: str) -> bool:
    """Whether a GPU operator of that name is registered in DALI (a library built with nvcc)."""
    from nvidia.dali import backend

    return schema in backend.RegisteredGPUOps()


def cpu_has(flag: str) -> bool:
    """Whether this CPU lists `flag` ("fma", "avx2") in /proc/cpuinfo (False where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and f" {flag} " in f" {line.split(':', 1)[-1].strip()} " for line in f)
    except OSError:
        return False


def _key(library: Library, commands: List[List[str]]) -> str:
    """Names the build: the sources, the command (compiler, DALI and CUDA paths) and the
    DALI library itself (version, and size and time, which differ between cuda12 and cuda13
    builds of one version)."""
    import nvidia.dali
    import nvidia.dali.sysconfig as dali_config

    digest = hashlib.sha256()
    for name in library.sources:
        with open(os.path.join(SOURCE_DIR, name), "rb") as f:
            digest.update(f.read())
    libdali = os.path.join(dali_config.get_lib_dir(), "libdali.so")
    stat = os.stat(libdali)
    digest.update(repr((commands, nvidia.dali.__version__, libdali, stat.st_size, stat.st_mtime_ns,
                        platform.machine())).encode())
    return f"dali-{nvidia.dali.__version__}-{digest.hexdigest()[:16]}"


def _cache_root() -> str:
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "dali_loaders")
    return os.path.join(root, "plugins")


_CUDA_HEADERS = ("cuda_runtime.h", os.path.join("crt", "host_config.h"), os.path.join("nv", "target"))


def _cuda_includes() -> List[str]:
    """Include folders with the CUDA headers DALI's headers need (the CUDA runtime's, its
    crt/ and nv/target): a CUDA toolkit, else pip's nvidia-* packages for DALI's CUDA."""
    for folder in _toolkit_includes():
        if all(os.path.exists(os.path.join(folder, h)) for h in _CUDA_HEADERS):
            return [folder]
    pip = _pip_cuda_includes()
    if pip and all(any(os.path.exists(os.path.join(f, h)) for f in pip) for h in _CUDA_HEADERS):
        return pip
    raise Unavailable("no CUDA headers, which DALI's headers include: pip install the [cuda12] or [cuda13] extra "
                      "of dali_loaders (or nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12 nvidia-cuda-cccl-cu12), "
                      "or install a CUDA toolkit and set CUDA_HOME")


def _toolkit_includes() -> List[str]:
    """The CUDA toolkits' include folders, in the order they are tried: DALI_LOADERS_CUDA_HOME
    alone when set, else CUDA_HOME, CUDA_PATH, nvcc's and /usr/local/cuda*."""
    chosen = os.environ.get(CUDA_HOME_ENV)
    if chosen:
        return [os.path.join(chosen, "include")]
    toolkits = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        toolkits.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    return toolkits + ["/usr/local/cuda/include"] + sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True)


# pip's CUDA 12 header packages, one folder each (nvidia-cuda-runtime-cu12, -nvcc-cu12, -cccl-cu12);
# CUDA 13's (nvidia-cuda-runtime, -crt, -cccl 13.x) share nvidia/cu13/include.
_PIP_CUDA12 = ("cuda_runtime", "cuda_nvcc", "cuda_crt", "cuda_cccl")


def _pip_cuda_includes() -> List[str]:
    """pip's CUDA header folders for the CUDA major version DALI was built for: a venv may hold
    another CUDA's too (torch's), whose headers must not be mixed in."""
    import nvidia
    import nvidia.dali

    cuda = getattr(nvidia.dali, "__cuda_version__", None)   # e.g. 12986 for 12.9
    major = int(cuda) // 1000 if cuda else None
    folders = []
    for root in list(getattr(nvidia, "__path__", [])):
        if major is None or major >= 13:
            pattern = [f"cu{major}"] if major else sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, "cu1*")))
            folders += [os.path.join(root, name, "include") for name in pattern]
        if major is None or major == 12:
            folders += [os.path.join(root, name, "include") for name in _PIP_CUDA12]
    return [f for f in folders if os.path.isdir(f)]
