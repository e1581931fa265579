"""torchvision (and the project's own) transforms, translated into DALI operators.

One recipe language, two backends: the user's transform is the recipe. `plan(transform)`
flattens it into steps and splits them where translation stops; `apply(steps, images)`
builds the DALI graph of the translated steps, one registered translator per class.
Op families live in their own modules (geometry, random_sizes, color, photometric,
photometric_distort, noise, jpeg, affine, perspective, elastic, linear, conversion, containers, auto_augment, aug_mix; FiveCrop and TenCrop as views in
multi_crop; one-line Lambdas read in lambdas; torchvision's weights' transforms() in presets); PIL's blur
is the project's own step (pil_blur) and a user's PIL classes are read as steps (pil_steps);
importing this package registers them all.
"""
from . import (  # noqa: F401  registers
    affine, aug_mix, auto_augment, color, containers, conversion, cutout, elastic, geometry, jpeg, lambdas,
    linear, multi_crop, noise, perspective, photometric, photometric_distort, presets, random_sizes)
from ._core import TRANSLATORS, Images, Untranslatable, apply, check, describe, flatten, register, supported_names
from ._plan import Plan, Views, made_views, plan, plans_of, untranslatable_reason
from ._placement import CPU_STEPS, GPU_DECODE, fused_on_cpu, host_steps_from, needs_conditionals, steps_on_cpu
from .dali_function import DaliFunction
from .pil_blur import PILGaussianBlur
from .python_fallback import as_tensor, call_step, call_steps, run_in_python, warn_slow
from .split_views import SplitViews

__all__ = ["CPU_STEPS", "GPU_DECODE", "DaliFunction", "PILGaussianBlur", "SplitViews", "TRANSLATORS", "Images", "Plan", "Untranslatable", "Views", "apply", "as_tensor", "call_step",
           "call_steps", "check",
           "describe", "flatten", "fused_on_cpu", "host_steps_from", "made_views", "needs_conditionals", "plan", "plans_of", "register", "run_in_python", "steps_on_cpu",
           "supported_names", "untranslatable_reason", "warn_slow"]
