"""What the test files share: the markers' rules, the data several files only read, the
environment fixtures. Plain helpers the files import by name live next to it (cifar_data.py,
image_data.py, dataset_data.py, photos.py, subprocess_env.py).

Markers (registered in pyproject.toml): slow (over ~10 s on a 2-core machine), subprocess
(starts Python processes), gpu (needs CUDA: skipped here where torch sees none).
`make test-quick` runs -m "not slow and not subprocess"."""
import os

# torchvision's tensor warps build their sampling grid with a matrix product (MKL's sgemm),
# whose AVX-512 kernels round some grid points another way than its AVX2 ones: on such a CPU
# a warped pixel can move by a level. The pixel-exact tests compare with the AVX2 kernels on
# every machine (set before torch is imported; subprocesses inherit it).
os.environ.setdefault("MKL_ENABLE_INSTRUCTIONS", "AVX2")

import pytest  # noqa: E402
from subprocess_env import CACHE_ENV, PLUGIN_CACHE  # noqa: E402

LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def pytest_collection_modifyitems(config, items):
    """gpu tests skip where torch sees no CUDA: one rule here, not a skipif in every file."""
    gpu_tests = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_tests:
        import torch

        if not torch.cuda.is_available():
            for item in gpu_tests:
                item.add_marker(pytest.mark.skip(reason="needs CUDA (marked gpu)"))


# -- environment ------------------------------------------------------------------------------

@pytest.fixture
def no_torchrun_env(monkeypatch):
    """This process as a plain one, whatever launched pytest: one rank of one."""
    for name in LAUNCHER_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_compiler(tmp_path, monkeypatch):
    """A compiler that does not exist and an empty plugin cache: every plugin build fails (a
    cold build on purpose); the plugins are forgotten before and after."""
    from dali_loaders.ops import plugin

    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    plugin.forget()
    yield
    plugin.forget()


@pytest.fixture
def own_home(tmp_path, monkeypatch):
    """HOME in this test's own folder, so whatever the library caches under ~/.cache starts
    cold; the C++ plugins' cache stays where it is (a rebuild is not what such tests test)."""
    home = tmp_path / "home"
    monkeypatch.setenv(CACHE_ENV, PLUGIN_CACHE)
    monkeypatch.setenv("HOME", str(home))
    return home


# -- data the tests only read -----------------------------------------------------------------

@pytest.fixture(scope="session")
def written_once(tmp_path_factory):
    """write(writer, *args, **kwargs): writer(root, *args, **kwargs) into a fresh folder, once
    per session for the same arguments (later calls get the first one's result). For data the
    tests only read: a test that changes files works on its own copy."""
    made = {}

    def write(writer, *args, **kwargs):
        key = (writer, args, tuple(sorted(kwargs.items())))
        if key not in made:
            made[key] = writer(str(tmp_path_factory.mktemp(writer.__name__)), *args, **kwargs)
        return made[key]

    return write


@pytest.fixture(scope="session")
def photo_files(tmp_path_factory):
    """The photographs (tests/photos.py) as JPEG files (longest side 160), read and decoded as
    ImageFolder's are."""
    from photos import write_photo_folder

    from dali_loaders.sources.files import FileSource

    paths = write_photo_folder(str(tmp_path_factory.mktemp("photos")), max_side=160)
    return FileSource(paths, [0] * len(paths), "photos")

# The S3 server fixture (`s3_server`): started once per session by the tests that ask for it.
pytest_plugins = ["s3_server"]


@pytest.fixture(params=["fused", "box", "arithmetic"])
def erase_path(request, monkeypatch):
    """Where a float RandomErasing runs: "fused", DaliLoadersErase (CPU graphs); or as GPU
    graphs run it, forced onto the CPU graph: "box", DaliLoadersEraseBox and DALI's fn.erase;
    "arithmetic", the box in DALI arithmetic (where the plugin is not built)."""
    from dali_loaders.ops import augment, plugin
    from dali_loaders.transforms import fused

    if request.param != "arithmetic" and not plugin.augment_available():
        pytest.skip("the augmentation plugin cannot be built here")
    if request.param != "fused":
        monkeypatch.setattr(fused, "erase_float", lambda *args, **kwargs: False)
    if request.param == "arithmetic":
        monkeypatch.setattr(augment, "draws_usable", lambda: False)
    return request.param


@pytest.fixture(params=["operator", "without"])
def augment_path(request, monkeypatch):
    """Both ways a CPU graph runs the steps the augmentation operator fuses: "operator", in it
    (skipped where the plugin cannot be built), and "without" it, in DALI's operators."""
    from dali_loaders.ops import plugin

    if request.param == "without":
        monkeypatch.setenv(plugin.DISABLE_AUGMENT_ENV, "1")
    elif not plugin.augment_available():
        pytest.skip("the augmentation operator is not built here")
    return request.param


@pytest.fixture(scope="module")
def photo_classes(tmp_path_factory):
    """An ImageFolder root of six photo-like PNGs, 40 pixels wide and 30 to 40 high, in two classes."""
    from image_data import photo

    root = tmp_path_factory.mktemp("photos")
    for k in range(6):
        os.makedirs(root / f"c{k % 2}", exist_ok=True)
        photo(40, 30 + 2 * k, k).save(root / f"c{k % 2}" / f"{k}.png")
    return str(root)
