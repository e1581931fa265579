"""What a loader's state_dict must match to be loaded, said in one place."""
from ..version import __version__

STATE_KEYS = ("version", "dataset", "batch_size", "drop_last", "rank", "world_size", "seed",
              "epoch", "batches_done", "dali")
MUST_MATCH = ("version", "dataset", "batch_size", "drop_last", "rank", "world_size")


def library_versions(dali: bool) -> dict:
    """The versions a DALI checkpoint is only valid under (DALI's format changes between them)."""
    versions = {"dali_loaders": __version__}
    if dali:
        import nvidia.dali

        versions["dali"] = nvidia.dali.__version__
    return versions


def check_state(state, mine: dict) -> None:
    """A ValueError (TypeError for a non-dict) naming what differs between a saved state and
    the state this loader would save; nothing if it may be loaded."""
    if not isinstance(state, dict):
        raise TypeError(f"state must be the dict that loader.state_dict() returned, got {type(state).__name__}")
    missing = sorted(set(STATE_KEYS) - set(state))
    if missing:
        raise ValueError(f"cannot load this state: it lacks {missing}; pass what loader.state_dict() returned")
    saved = state.get("versions") or {}
    for name, version in mine["versions"].items():
        if state["dali"] is not None and saved.get(name) != version:
            raise ValueError(f"cannot load this state: it was saved under {name} "
                             f"{saved.get(name, 'an unrecorded version')}, and this is {name} {version}; a DALI "
                             f"checkpoint loads only under the versions that wrote it: install those, or "
                             f"start the epoch again (drop the state)")
    for key in MUST_MATCH:
        if state[key] != mine[key] and not (key == "rank" and state["world_size"] == mine["world_size"]):
            raise ValueError(f"cannot load this state: its {key} is {state[key]!r} but this loader's is "
                             f"{mine[key]!r}; build the loader as the saved one was built")


def dataset_fingerprint(dataset) -> str:
    """What a state must match to be loaded: the dataset's own fingerprint, else its kind and size."""
    fingerprint = getattr(dataset, "fingerprint", None)
    return fingerprint if fingerprint is not None else f"{type(dataset).__name__}/{len(dataset)}"
