"""timm's create_loader on DALI: `from dali_loaders.timm import create_loader`.
(It lives in integrations/timm.py; this name is the one users import.)"""
from .integrations.timm import *  # noqa: F401,F403
from .integrations.timm import __all__  # noqa: F401
