"""The environment of a test's Python subprocess: this checkout and tests/ importable, no
torchrun variables inherited from a launcher around pytest, and, where the test gives the
process a HOME of its own, the C++ plugins' cache kept (else every such process compiles
the plugins again, a minute or more each)."""
import os

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
CACHE_ENV = "DALI_LOADERS_CACHE"   # dali_loaders/ops/plugin.py's


def plugin_cache_root() -> str:
    """The cache folder the plugins are built into with this environment (plugin.py's rule)."""
    from dali_loaders.ops import plugin

    return os.path.dirname(plugin._cache_root())


# Read once, when pytest loads conftest.py: before any test moves HOME.
PLUGIN_CACHE = plugin_cache_root()


def subprocess_env(home=None, tmp=None, **changes) -> dict:
    """os.environ for a child Python: PYTHONPATH with the checkout and tests/ first, the
    launcher's variables dropped; `home` (a new HOME: a cold ~/.cache) keeps the plugin cache
    unless DALI_LOADERS_CACHE is already set (a test that wants a cold build sets it); `tmp`,
    the child's temp folder (torchrun's agents leave a log folder in theirs)."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, TESTS, os.environ.get("PYTHONPATH")) if p)
    if home is not None:
        env["HOME"] = str(home)
        env.setdefault(CACHE_ENV, PLUGIN_CACHE)
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    env.update(changes)
    return env
