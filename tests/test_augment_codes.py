"""csrc/augment_codes.h is the one list of DaliLoadersAugment's numbers: ops/augment.py reads it,
the operator is compiled with it; here the two sides are checked against each other."""
import glob
import os
import re

import numpy as np
import pytest

from dali_loaders.ops import augment as op
from dali_loaders.ops import plugin


def test_the_header_is_read_whole():
    with open(op.CODES_HEADER) as f:
        entries = re.findall(r"^\s*k(\w+)\s*=\s*(-?\d+),", f.read(), re.MULTILINE)
    parsed = op.read_enums(op.CODES_HEADER)
    assert sorted((name, value) for enum in parsed.values() for name, value in enum.items()) == \
        sorted((name, int(value)) for name, value in entries)
    assert set(op.CODES.values()) == set(range(len(op.CODES)))   # dense, from 0: the operator's check
    assert sorted(op.ROW.values()) == [0, 1, 5, 6, 7, 8] and max(op.ROW.values()) == op.TABLE_COLUMNS - 1
    assert sorted(op.LEVEL.values()) == list(range(op.LEVEL_COLUMNS))


def test_a_malformed_entry_is_refused_by_name(tmp_path):
    header = tmp_path / "codes.h"
    header.write_text("enum Good : int {\n  kA = -1,   // a comment, {braces} too\n  kB = 2,\n};\n"
                      "enum Bad {\n  kC = 1,\n  kD,\n};\n")
    with pytest.raises(ValueError, match=r"enum Bad: 'kD' is not `kName = integer`"):
        op.read_enums(str(header))
    header.write_text("enum Good : int {\n  kA = -1,   // a comment\n  kB = 2,\n};\n")
    assert op.read_enums(str(header)) == {"Good": {"A": -1, "B": 2}}


def test_no_other_source_numbers_the_ops_again():
    """The numbers live in augment_codes.h alone: no other C++ source defines them again."""
    defined = re.compile(r"enum\s+OpCode|\bk(?:NumParams|TableColumns|LevelColumns|LevelDraws|Bicubic)\s*=\s*\d")
    others = [path for path in glob.glob(os.path.join(plugin.SOURCE_DIR, "*.*"))
              if os.path.basename(path) != "augment_codes.h" and defined.search(open(path).read())]
    assert not others


def test_table_row_places_each_value_in_its_column():
    row = op.table_row("Rotate", [10.0, 2.0], relative_x=1.0, span=5.0, probability=0.5)
    assert len(row) == op.TABLE_COLUMNS and row[op.ROW["Code"]] == op.CODES["Rotate"]
    assert row[op.ROW["P0"]:op.ROW["P0"] + op.NUM_PARAMS] == [10.0, 2.0, 0.0, 0.0]
    assert (row[op.ROW["RelativeX"]], row[op.ROW["RelativeY"]], row[op.ROW["Span"]], row[op.ROW["Probability"]]) == \
        (1.0, 0.0, 5.0, 0.5)


# -- the compiled operator, in its test-only mode that outputs each sample's resolved steps ------


@pytest.fixture(scope="module")
def built():
    if not plugin.augment_available():
        pytest.skip(f"the augmentation plugin cannot be built here: {plugin._states[plugin.AUGMENT.file].get('why')}")


def batch_of(value):
    return lambda: [value]   # no parameter: external_source would pass it the iteration


def resolved(image, **arguments):
    """The operator's steps for one image [(code, p0, p1, p2, p3), ...] (its `_record` mode);
    per-sample arguments are numpy arrays, the rest as the operator takes them."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: [image], batch=True, layout="HWC")
        inputs = {name: fn.external_source(source=batch_of(value), batch=True)
                  for name, value in arguments.items() if isinstance(value, np.ndarray)}
        constants = {name: value for name, value in arguments.items() if not isinstance(value, np.ndarray)}
        return fn.dali_loaders_augment(data, kernels="pil", _record=True, **inputs, **constants)

    pipeline = pipe()
    pipeline.build()
    out = np.array(pipeline.run()[0][0])
    steps = len(arguments["slot_plan"]) // 4 if "slot_plan" in arguments else len(arguments["ops"])
    return np.frombuffer(out.tobytes()[:steps * (1 + op.NUM_PARAMS) * 4], np.float32).reshape(steps, -1).tolist()


def test_the_operator_knows_every_code_and_no_more(built):
    image = np.zeros((16, 16, 3), np.uint8)
    codes = np.array(sorted(op.CODES.values()) + [op.SKIP], np.int32)
    params = np.zeros((len(codes), op.NUM_PARAMS), np.float32)
    params[codes == op.CODES["GaussianBlur"]] = [1.0, 3.0, 3.0, 0.0]   # the one op whose zeros are refused
    steps = resolved(image, ops=codes, params=params)
    assert [int(step[0]) for step in steps] == codes.tolist()
    with pytest.raises(RuntimeError, match="unknown op code"):
        resolved(image, ops=np.array([len(op.CODES)], np.int32), params=np.zeros((1, op.NUM_PARAMS), np.float32))


def test_the_operator_reads_the_table_and_level_columns_where_python_writes_them(built):
    image = np.zeros((20, 40, 3), np.uint8)   # height 20, width 40
    level = np.zeros(op.LEVEL_COLUMNS)
    for name, value in {"Active": 1.0, "FixedPlus": 3.0, "FixedMinus": -2.0, "Direction": 1.0,
                        "RelativeY": 1.0, "Warp": 1.0, "P1": 0.0}.items():
        level[op.LEVEL[name]] = value
    table = [op.table_row("Rotate", [10.0, 2.0], span=4.0, probability=0.5),      # applies: draw 0.25 <= 0.5
             op.table_row("Solarize", [100.0], probability=0.5),                  # skipped: draw 0.75 > 0.5
             op.table_row("TranslateX", [0.25, 3.0], relative_x=1.0),             # a quarter of the width
             op.table_row("ShearY", [0.0, 0.0, 1.0])]                             # p0, p1 from its level
    levels = np.concatenate([np.zeros(3 * op.LEVEL_COLUMNS), level])
    # uniforms: the first two rows' draws, then the last row's five level uniforms
    uniforms = np.array([0.25, 0.75, 0.0, 0.0, 0.0, 0.25, 0.9], np.float32)   # sign (< 0.5: minus), last resample
    plan = [-1, 0, 0, -1, -1, 1, 1, -1, -1, 2, -1, -1, -1, 3, -1, 2]   # fixed rows 0 .. 3, as picks say
    steps = resolved(image, table=[float(v) for v in np.ravel(table)], uniforms=uniforms, slot_plan=plan,
                     picks=[0, 1, 2, 3], levels=[float(v) for v in levels], resamples=[0.0, 3.0])
    assert steps == [[op.CODES["Rotate"], 11.0, 2.0, 0.0, 0.0], [op.SKIP, 100.0, 0.0, 0.0, 0.0],
                     [op.CODES["TranslateX"], 10.0, 3.0, 0.0, 0.0], [op.CODES["ShearY"], -2.0 * 20, 3.0, 0.0, 0.0]]
