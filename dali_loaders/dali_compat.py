"""Everything dali_loaders needs of DALI beyond its documented API, in one place: the DALI
versions it works with, and each use of a private DALI name, gated on the versions it was
seen to work on.

DALI older than MINIMUM is refused where the loaders first import it (require_dali): 2.1
and 1.53 lack `adjust_orientation` on peek_image_shape and the decoders, and 1.53 lacks
fn.filter. The private names below were checked on every version in SEEN_TO_WORK. On a
newer DALI each use either falls back to DALI's public behaviour (slower, never different)
or, where there is no public way, is used if the name is still there, with one warning;
if it is gone, the error says which DALI to install.

Imports nothing of ours, and DALI only when called: `loader/` and `transforms/` use it.
"""
import contextlib
import hashlib
import os
import re
import sys
import threading
import warnings
from typing import Dict, Iterator, List, Optional, Tuple

MINIMUM = (2, 3)
SEEN_TO_WORK = ((2, 3), (2, 4))   # (major, minor) releases the test suite passed on
AUTOGRAPH_PREFIX = "__autograph_generated_file"   # DALI's AutoGraph writes its converted code there
INSTALL = ('pip install -U "nvidia-dali-cuda120>=2.3" (CUDA 13: "nvidia-dali-cuda130>=2.3"), '
           'or `pip install -U "dali_loaders[cuda12]"`')


class DaliTooOld(ImportError):
    """The installed DALI is older than the loaders need."""


def _parse(version: str) -> Tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def dali_version() -> Optional[str]:
    """The installed DALI's version, or None where DALI cannot be imported."""
    try:
        import nvidia.dali
    except ImportError:
        return None
    return nvidia.dali.__version__


def minimum_text() -> str:
    return ".".join(map(str, MINIMUM))


def require_dali():
    """nvidia.dali, imported; DaliTooOld if it is older than MINIMUM (ImportError if missing)."""
    import nvidia.dali

    if _parse(nvidia.dali.__version__)[:2] < MINIMUM:
        raise DaliTooOld(f"dali_loaders needs NVIDIA DALI >= {minimum_text()}, but DALI {nvidia.dali.__version__} "
                         f"is installed: {INSTALL}")
    return nvidia.dali


def seen_to_work() -> bool:
    """Whether the installed DALI is a release the private uses below were checked on."""
    version = dali_version()
    return version is not None and _parse(version)[:2] in SEEN_TO_WORK


def warp_perspective_on_cpu() -> bool:
    """Whether fn.experimental.warp_perspective has its CPU backend (DALI 2.4 has it; 1.41 had
    only the GPU's; 2.3 was not checked, so it is taken as lacking it)."""
    version = dali_version()
    return version is not None and _parse(version)[:2] >= (2, 4)


def versions() -> Dict[str, Optional[str]]:
    """{"dali": the installed DALI's version or None, "dali_loaders": ours}: what a state_dict
    records, so a resume on another DALI can be told apart."""
    ours = getattr(sys.modules.get(__package__), "__version__", None)   # the package, imported by now
    return {"dali": dali_version(), "dali_loaders": ours}


_warned_untested = False


def _private(owner, *names: str) -> bool:
    """Whether `owner` (a DALI class or object) may be used through its private `names`: yes on
    a release seen to work; on another, if they are all there, after one warning."""
    global _warned_untested
    if seen_to_work():
        return True
    if not all(hasattr(owner, name) for name in names):
        return False
    if not _warned_untested:
        _warned_untested = True
        seen = ", ".join(".".join(map(str, v)) for v in SEEN_TO_WORK)
        warnings.warn(f"dali_loaders was checked with DALI {seen}, not DALI {dali_version()}: it uses a few of "
                      f"DALI's internals as it does on those (if anything misbehaves, install one of those)",
                      RuntimeWarning, stacklevel=3)
    return True


def _missing(what: str) -> RuntimeError:
    seen = ", ".join(".".join(map(str, v)) for v in SEEN_TO_WORK)
    return RuntimeError(f"dali_loaders cannot run on DALI {dali_version()}: its {what} differs from the DALI "
                        f"releases dali_loaders works with ({seen}); install one of those")


# -- the pipeline -----------------------------------------------------------------------------


class _ApiScope:
    """What DALI's Pipeline._check_api_type_scope returns: no further API checks inside."""
    __slots__ = ("pipe", "before")

    def __init__(self, pipe):
        self.pipe = pipe

    def __enter__(self):
        self.before, self.pipe._skip_api_check = self.pipe._skip_api_check, True

    def __exit__(self, *failure):
        self.pipe._skip_api_check = self.before


def lean_api_checks(pipe) -> None:
    """Gives `pipe` DALI's own API-type check without the class DALI defines anew in each call
    of _check_api_type_scope (about 9 us, five times a batch on the loader's thread: a tenth of
    a CIFAR batch). Same checks, same scope. Pipeline.enable_api_check(False) would not do:
    it drops the checks (mixing the run APIs would no longer be refused) and keeps the class.
    Only on the releases seen to work; elsewhere DALI's own scope stays (slower, the same)."""
    import weakref

    if not seen_to_work() or not all(hasattr(pipe, name) for name in
                                     ("_check_api_type", "_skip_api_check", "_check_api_type_scope")):
        return
    owner = weakref.ref(pipe)   # the pipeline holds this function: no reference cycle

    def check_api_type_scope(api_type):
        pipeline = owner()
        if not pipeline._skip_api_check:
            pipeline._check_api_type(api_type)
        return _ApiScope(pipeline)

    pipe._check_api_type_scope = check_api_type_scope


def shutdown(pipeline) -> None:
    """Stops a pipeline's threads now (DALI's own __del__ and atexit hook use this), not when
    the garbage collector happens to collect it. Elsewhere: left to the collector."""
    if _private(pipeline, "_shutdown"):
        pipeline._shutdown()


def can_restore(pipeline) -> bool:
    """Whether a built, idle pipeline can be put back to a checkpoint (restore()) and its
    epochs' start states made here (reseeded()). Where not, the loaders build a fresh
    pipeline per epoch, from the checkpoint, through DALI's public `checkpoint=`: the same
    batches, slower."""
    return seen_to_work() and hasattr(pipeline, "_restore_state_from_checkpoint") \
        and hasattr(pipeline, "_get_checkpoint")


def restore(pipeline, checkpoint: bytes) -> None:
    # DALI restores a checkpoint only at build; its own restore step works on a built,
    # idle pipeline too (every run drained): checked by test_pipeline_life.
    pipeline._checkpoint = checkpoint
    pipeline._restore_state_from_checkpoint()


def checkpoint_operators(checkpoint: bytes) -> Optional[List[bytes]]:
    """The operators' names a checkpoint holds state for, in order (None if it cannot be read):
    a checkpoint restores only into a graph of the same operators."""
    try:
        return [name for number, wire, _, value in _fields(checkpoint) if number == 1 and wire == 2
                for inner_number, inner_wire, _, name in _fields(value) if inner_number == 1 and inner_wire == 2]
    except (ValueError, IndexError):
        return None


def checkpoint_with(pipeline, iterator_data: str) -> bytes:
    """The pipeline's checkpoint holding `iterator_data` as its iterator's state, taken without
    running an iterator. Only where can_restore() said yes."""
    return pipeline._get_checkpoint(iterator_data=iterator_data)


# A checkpoint (DALI's protobuf `Checkpoint`): field 1 repeats each operator's
# {1: name, 2: state}; field 2 is the Python side (the sources' iteration, the iterator's
# data). On the releases seen to work every random operator (fn.random.*, the random crops,
# random_resized_crop, the decoders' random crop) keeps a Philox generator, its state text
# "Philox_<key>_<counter high>:<counter low>_<phase>"; every other operator of the loaders'
# graphs keeps none.
_PHILOX = re.compile(rb"Philox_[0-9A-F]{16}_[0-9A-F]{16}:[0-9A-F]{16}_[0-9]+")


def reseeded(checkpoint: bytes, seed: int) -> Optional[bytes]:
    """`checkpoint` with each random operator's generator at the start of a stream of its own,
    keyed by (seed, the operator's place in the graph): the state a pipeline starts an epoch
    in, made without building one. None where an operator keeps a state of another kind, or
    on a DALI release not seen to work (the caller builds a pipeline per epoch then)."""
    if not seen_to_work():
        return None
    try:
        parts = _fields(checkpoint)
    except ValueError:
        return None
    out, place = bytearray(), 0
    for number, wire, raw, value in parts:
        if number != 1 or wire != 2:
            out += raw
            continue
        operator = bytearray()
        for inner_number, inner_wire, inner_raw, state in _fields(value):
            if inner_number == 2 and inner_wire == 2 and state:
                if not _PHILOX.fullmatch(state):
                    return None
                key = int.from_bytes(hashlib.blake2b(f"{seed}:{place}".encode(), digest_size=4).digest(), "big")
                state = b"Philox_%016X_%016X:%016X_0" % (key, 0, 0)
                inner_raw = _key(2, 2) + _varint(len(state)) + state
                place += 1
            operator += inner_raw
        out += _key(1, 2) + _varint(len(operator)) + operator
    return bytes(out)


def graph_operators(serialized: bytes) -> List[Tuple[str, str, str, List[Tuple[str, str]]]]:
    """(operator, instance name, device, [(input, its device)]) of each operator of a serialized
    pipeline (DALI's protobuf `PipelineDef`: field 5 repeats the operators; each has its type
    (1), inputs (2: {1: name, 2: device}) and arguments (4: {1: name, 5: a string value}), the
    device among them)."""
    operators = []
    for number, wire, _, operator in _fields(serialized):
        if number != 5 or wire != 2:
            continue
        kind, name, device, inputs = "", "", "cpu", []
        for field, _, _, value in _fields(operator):
            if field == 1:
                kind = value.decode()
            elif field == 5:
                name = value.decode()
            elif field == 2:
                entry = {f: v for f, _, _, v in _fields(value)}
                inputs.append((entry.get(1, b"").decode(), entry.get(2, b"cpu").decode()))
            elif field == 4:
                entry = {f: v for f, _, _, v in _fields(value)}
                if entry.get(1) == b"device" and isinstance(entry.get(5), bytes):
                    device = entry[5].decode()
        operators.append((kind, name, device, inputs))
    return operators


def graph_outputs(serialized: bytes) -> List[Tuple[str, str]]:
    """(name, device) of each output of a serialized pipeline (`PipelineDef` field 7)."""
    outputs = []
    for number, wire, _, value in _fields(serialized):
        if number == 7 and wire == 2:
            entry = {f: v for f, _, _, v in _fields(value)}
            outputs.append((entry.get(1, b"").decode(), entry.get(2, b"cpu").decode()))
    return outputs


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _read_varint(data: bytes, at: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _fields(data: bytes):
    """[(field number, wire type, the field's raw bytes, its value)] of a protobuf message:
    varints and length-delimited fields (all a checkpoint holds) and fixed 32/64-bit ones."""
    at, parts = 0, []
    while at < len(data):
        start = at
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(data, at)
        elif wire == 2:
            length, at = _read_varint(data, at)
            value, at = data[at:at + length], at + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, at = data[at:at + size], at + size
        else:
            raise ValueError(f"wire type {wire}")
        if at > len(data):
            raise ValueError("truncated field")
        parts.append((number, wire, data[start:at], value))
    return parts


def forget_inherited_pipelines(keep: list) -> None:
    """In a forked child: every DALI pipeline of the parent is appended to `keep` (alive
    forever) and taken out of DALI's atexit shutdown, which would wait on the parent's threads.
    Without it (a DALI whose registry differs) a child may hang at exit: so it is used wherever
    the registry is still a set of weak references, with the warning on an unchecked DALI."""
    dali_pipeline = sys.modules.get("nvidia.dali.pipeline")
    pipeline_class = getattr(dali_pipeline, "Pipeline", None)
    registry = getattr(pipeline_class, "_pipes", None)
    if not isinstance(registry, set) or not _private(pipeline_class, "_pipes"):
        return
    for ref in list(registry):
        pipeline = ref()
        if pipeline is not None:
            keep.append((pipeline, getattr(pipeline, "_pipe", None)))
            pipeline._pipe = None   # its __del__ then has nothing to shut down
    registry.clear()


# -- the epoch iterator -----------------------------------------------------------------------

_EpochIterator = None  # defined on first use: DALI is imported only when a DALI loader runs
_define_lock = threading.Lock()


def epoch_iterator(pipeline, runs: int, ahead: int = 0, in_flight: int = 0, outputs=None):
    """A DALIGenericIterator that hands out `runs` batches and schedules no run past them but
    `ahead` runs of the epoch that follows (at most the pipeline's prefetch depth); `in_flight`
    of its own runs are in the pipeline already, handed over by the previous epoch's iterator
    (`handover()`).

    The stock iterator keeps prefetch_queue_depth runs in flight past the end of the epoch:
    whole batches decoded for nothing (2 of a 20-batch epoch) unless they are the next
    epoch's, and the pipeline waits for them before it can be put in another state.
    """
    global _EpochIterator
    with _define_lock:
        if _EpochIterator is None:
            _EpochIterator = _define_epoch_iterator()
    return _EpochIterator(pipeline, runs, ahead, in_flight, outputs)


def _define_epoch_iterator():
    # One class for all epochs, holding no pipeline itself: a class made per epoch would
    # be a reference cycle keeping that epoch's pipeline, threads and buffers alive until
    # the garbage collector happens to run.
    from nvidia.dali import types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    if not _private(DALIGenericIterator, "_schedule_runs", "_get_outputs", "_save_state"):
        raise _missing("DALIGenericIterator")

    class EpochIterator(DALIGenericIterator):
        def __init__(self, pipeline, runs: int, ahead: int, in_flight: int, outputs=None):
            # before the base __init__, which may schedule
            depth = pipeline.prefetch_queue_depth
            self._depth = max(depth.values()) if isinstance(depth, dict) else depth
            self._runs = runs                                  # the batches this iterator hands out
            self._limit = runs + min(ahead, self._depth)       # the runs it may have scheduled in all
            self._scheduled = in_flight                        # its runs scheduled (by it, or before it)
            self._taken = 0                                    # outputs it took from the pipeline
            self._overrun = False                              # a run scheduled past `_limit`
            self.carried = in_flight > 0                       # it began with runs already in flight
            # A pipeline's first schedule_run puts `depth` runs in flight, later ones one.
            self._new_pipeline = getattr(pipeline, "_first_iter", True)
            # a graph whose loader reads the labels itself has the images alone (build.graph);
            # a view maker's has an output per view (build.output_names)
            outputs = list(outputs) if outputs is not None else ["images", "labels"][:pipeline.num_outputs]
            super().__init__([pipeline], outputs, auto_reset=False, prepare_first_batch=False)

        def _schedule_runs(self, release_outputs=True):
            # Overrides a private method of DALI's base iterator (the one place it schedules).
            first = not self._ever_scheduled
            self._ever_scheduled = True
            if release_outputs:
                self._release()
            if first and self._new_pipeline:
                self._schedule_one()   # DALI's prefetch: `depth` runs
                self._scheduled += self._depth - 1
                self._overrun = self._scheduled > self._limit
                return
            wanted = self._depth - (self._scheduled - self._taken) if first else 1
            for _ in range(max(0, min(wanted, self._limit - self._scheduled))):
                self._schedule_one()

        def _schedule_one(self):
            for pipeline in self._pipes:
                with pipeline._check_api_type_scope(types.PipelineAPIType.ITERATOR):
                    pipeline.schedule_run()
            self._scheduled += 1

        def _get_outputs(self):
            outputs = super()._get_outputs()
            self._taken += 1
            return outputs

        def _release(self):
            for pipeline in self._pipes:
                with pipeline._check_api_type_scope(types.PipelineAPIType.ITERATOR):
                    pipeline.release_outputs()

        def handover(self) -> int:
            """Once every batch of the epoch was taken: the runs of the next epoch in flight,
            now the next iterator's (`in_flight`); 0 where there are none to hand over (the
            epoch left early, or runs past the end that are nobody's)."""
            if self._taken < self._runs or self._overrun:
                return 0
            ahead, self._scheduled = self._scheduled - self._taken, self._taken
            return ahead

        def drain(self):
            """Takes and drops the outputs of the runs still in flight (a loop left early, or
            runs past the end), so the pipeline is idle for the next epoch."""
            while self._scheduled > self._taken:
                self._taken += 1
                for pipeline in self._pipes:
                    with pipeline._check_api_type_scope(types.PipelineAPIType.ITERATOR):
                        pipeline.share_outputs()
                        pipeline.release_outputs()

        def fresh_state(self) -> str:
            """The iterator data a checkpoint taken before any batch holds."""
            return self._save_state()

    return EpochIterator


# -- auto_aug ---------------------------------------------------------------------------------

_Unconverted = None


def unconverted_augmentation():
    """DALI's Augmentation class (public as nvidia.dali.auto_aug.core._Augmentation), called
    without DALI's AutoGraph conversion. Neither it nor our operations branch on a DataNode;
    converted, its parameter tables are re-converted per magnitude at every pipeline build:
    ~1,600 conversions, seconds per epoch."""
    global _Unconverted
    if _Unconverted is None:
        from nvidia.dali.auto_aug.core import _Augmentation
        from nvidia.dali.pipeline import do_not_convert

        _Unconverted = type("UnconvertedAugmentation", (_Augmentation,),
                            {"__call__": do_not_convert(_Augmentation.__call__)})
    return _Unconverted


# -- AutoGraph's files ------------------------------------------------------------------------


def autograph_files() -> Dict[str, str]:
    """module name -> file of every module DALI's AutoGraph has loaded in this process."""
    return {name: getattr(module, "__file__", None) or "" for name, module in list(sys.modules.items())
            if name.startswith(AUTOGRAPH_PREFIX)}


@contextlib.contextmanager
def autograph_files_removed() -> Iterator[None]:
    """Deletes, on leaving, the files DALI's AutoGraph wrote while a graph with conditionals
    was traced inside. AutoGraph writes each converted function to the temp folder, imports
    it and deletes it only at exit (never, for a process that is killed or forks). The
    imported modules hold the compiled code; the files are read only while importing, and
    for a traceback's source lines."""
    before = set(autograph_files())
    try:
        yield
    finally:
        for name, path in autograph_files().items():
            if name not in before and os.path.basename(path).startswith(AUTOGRAPH_PREFIX):
                with contextlib.suppress(OSError):
                    os.remove(path)
