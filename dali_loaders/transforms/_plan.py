"""The plan of a recipe: which of its steps DALI runs and which run in Python, per view.

`plan(transform)` flattens a transform into steps (_core.flatten) and splits them at the first
one with no translation; a view maker (view_makers.py) gives a Plan per view, SplitViews a Plan
for the steps its views share as well.
"""
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch

from ._core import (
    MAX_NESTING,
    TRANSLATORS,
    check,
    describe,
    dtype_past,
    final_dtype,
    flatten,
    supported_names,
    users_class,
    wrapped,
)
from .multi_crop import crop_views
from .split_views import SplitViews
from .view_makers import views_of


@dataclass
class Plan:
    translated: List[Any]       # steps DALI runs
    python: List[Any]           # steps from the first untranslatable one on, run per sample in Python
    why: str = ""               # why `python` is not empty

    @property
    def output_dtype(self) -> torch.dtype:
        return final_dtype(self.translated) if not self.python else None


@dataclass
class Views:
    """The recipe of a view maker (view_makers.py): one Plan per view, in the order of the list
    it returns; each view is an output of the graph, and the batch holds a list of them.
    `shared`: the steps every view starts from, run once before the views branch (SplitViews).
    `stacked`: the batch holds them stacked instead, (B, views, C, H, W)."""
    plans: List[Plan]
    shared: Optional[Plan] = None
    stacked: bool = False


def plans_of(recipe) -> List[Plan]:
    """The Plans of a recipe's outputs: a Views' own, or the one Plan."""
    return recipe.plans if isinstance(recipe, Views) else [recipe]


def every_plan(recipe) -> List[Plan]:
    """Every Plan whose steps the graph runs: the shared steps of SplitViews, then the outputs'."""
    shared = recipe.shared if isinstance(recipe, Views) else None
    return ([shared] if shared is not None else []) + plans_of(recipe)


def made_views(transform, _depth: int = 0) -> Optional[List[Any]]:
    """The transforms of each view where `transform` is a view maker (an unregistered class of
    the user's, see view_makers.py), or a wrapper of one, or holds FiveCrop or TenCrop
    (multi_crop.py), else None."""
    transform = crop_views(transform) or transform
    if isinstance(transform, SplitViews):
        return transform.views
    if transform is None or isinstance(transform, (list, tuple)) or not users_class(transform) \
            or _depth > MAX_NESTING:
        return None
    inner, _ = wrapped(transform)
    if inner is not None:
        return made_views(inner, _depth + 1)
    return views_of(transform)[0]


def untranslatable_reason(transform) -> Optional[str]:
    """Why DALI cannot run `transform` whole (the first step with no translation, or a
    wrapper that does more than hand the image on), or None when every step translates."""
    transform = crop_views(transform) or transform
    if isinstance(transform, SplitViews):
        why = _first_refusal(transform.first)
        if why:
            return f"the steps the views of SplitViews share: {why}"
    views = made_views(transform)
    if views is not None:
        reasons = ((k, _first_refusal(view)) for k, view in enumerate(views))
        return next((f"view {k} of {describe(transform)}: {why}" for k, why in reasons if why), None)
    return _first_refusal(transform)


def _first_refusal(transform) -> Optional[str]:
    return _refusal(flatten(transform))[1] or None


def _refusal(steps) -> Tuple[int, str]:
    """(where, why) of the first step DALI cannot run where it stands: one with no translation
    or a parameter refused (check), or one refused on the dtype the steps before it make (its
    translator's `refuse_on`: a step on uint8 pixels after the conversion to float, integer
    arithmetic); (len(steps), "") when every step runs."""
    dtype = torch.uint8
    for k, step in enumerate(steps):
        reason = check(step) or getattr(TRANSLATORS[type(step)], "refuse_on", lambda s, d: "")(step, dtype)
        if reason:
            return k, reason
        dtype = dtype_past(step, dtype)
    return len(steps), ""


def plan(transform, python_fallback: bool):
    """Splits the steps at the first one with no translation; raises for it unless python_fallback.
    A Plan, or for a view maker Views of a Plan per view."""
    transform = crop_views(transform) or transform
    views = made_views(transform)
    if isinstance(transform, SplitViews):
        shared = _split(transform.first, python_fallback)
        if shared.python:   # Python steps run per view: they would draw a window each
            raise ValueError(f"SplitViews: {shared.why}; the steps the views share must all run in DALI "
                             f"(a view's own steps may run in Python), or the loader takes the Python path "
                             f"with python_fallback=False")
        return Views([_split(view, python_fallback) for view in views], shared=shared, stacked=transform.stacked)
    if views is not None:
        return Views([_split(view, python_fallback) for view in views])
    return _split(transform, python_fallback)


def _split(transform, python_fallback: bool) -> Plan:
    steps = flatten(transform)
    closing = [k for k, step in enumerate(steps) if getattr(TRANSLATORS.get(type(step)), "last", False)]
    if closing and closing[0] != len(steps) - 1:
        raise ValueError(f"{describe(steps[closing[0]])} must be the recipe's last step (its output is the batch); "
                         f"move {describe(steps[closing[0] + 1])} before it or into it")
    k, reason = _refusal(steps)
    if not reason:
        return Plan(steps, [])
    if not python_fallback:
        raise ValueError(f"{reason}. Supported: {', '.join(supported_names())}. Or pass "
                         f"python_fallback=True to run it, and every step after it, in Python")
    return Plan(steps[:k], steps[k:], reason)


# a step's top-level package -> our module registering translators for its classes, imported
# when a step of that package is first seen: the package stays an optional dependency
