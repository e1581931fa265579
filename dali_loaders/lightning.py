"""Lightning DataModules for every dataset: `from dali_loaders.lightning import CIFAR10DataModule`.
(They live in integrations/lightning.py; this name is the one users import.)"""
from .integrations.lightning import *  # noqa: F401,F403
from .integrations.lightning import __all__  # noqa: F401
