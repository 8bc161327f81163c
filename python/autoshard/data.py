"""Writes and reads the training binary's `--data` files (the asdata format
of docs/RuntimeABI.md): one field per input of the step, rows = the batches
of all steps one after the other, so that step s reads the s-th batch.

Needs numpy only; torch tensors are accepted when torch is installed.
`python3 -m autoshard.data` shows a file and converts .npz archives."""

import dataclasses
import os
import struct

import numpy as np

MAGIC = b"ASDATA01"

# The asrt_dtype codes (runtime/include/autoshard/rt/abi.h, enum asrt_dtype)
# and how each is stored, little-endian. bf16 is kept as its 16 bits.
DTYPE_CODES = {"f32": 0, "i32": 1, "bf16": 2, "f16": 3, "i64": 4, "u16": 5}
DTYPE_NAMES = {code: name for name, code in DTYPE_CODES.items()}
_STORAGE = {"f32": "<f4", "i32": "<i4", "bf16": "<u2", "f16": "<f2",
            "i64": "<i8", "u16": "<u2"}


def _as_numpy(name, value):
    """(array in the file's dtype, dtype name) of one field of one batch."""
    try:
        import torch
    except ImportError:  # numpy arrays still work without torch
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            return value.view(torch.int16).numpy().view(np.uint16), "bf16"
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype.kind in "iu":
        if array.size and (array.min() < -2**31 or array.max() >= 2**31):
            raise ValueError(
                f"write_batches: field '{name}' holds integers outside the "
                f"32-bit range the step's i32 inputs take")
        return array.astype("<i4"), "i32"
    if array.dtype.kind == "f":
        return array.astype("<f4"), "f32"
    raise ValueError(f"write_batches: field '{name}' has dtype {array.dtype}; "
                     f"the step's inputs are float or integer tensors")


def write_batches(path, batches):
    """Writes `batches` (a list with one dict per step, each mapping the
    step's input names to tensors whose first dimension is the global batch)
    as an asdata file that a compiled binary reads with `--data PATH`.

    Every batch must have the same fields, shapes and dtypes; integer tensors
    are stored as int32 (the step's ids and labels), floating ones as f32
    (bf16 tensors stay bf16)."""
    if not batches:
        raise ValueError("write_batches: no batches (give one dict per step)")
    names = list(batches[0].keys())
    if not names:
        raise ValueError("write_batches: the first batch has no fields")
    columns = {name: [] for name in names}
    rows_per_batch = None
    spec = {}
    for index, batch in enumerate(batches):
        if set(batch.keys()) != set(names):
            raise ValueError(
                f"write_batches: batch {index} has fields {sorted(batch)}, "
                f"batch 0 has {sorted(names)}")
        for name in names:
            array, dtype = _as_numpy(name, batch[name])
            if array.ndim == 0:
                raise ValueError(
                    f"write_batches: field '{name}' of batch {index} is a "
                    f"scalar; its first dimension must be the batch")
            if rows_per_batch is None:
                rows_per_batch = array.shape[0]
            if array.shape[0] != rows_per_batch:
                raise ValueError(
                    f"write_batches: field '{name}' of batch {index} has "
                    f"{array.shape[0]} rows, other fields {rows_per_batch}")
            key = (dtype, array.shape[1:])
            if spec.setdefault(name, key) != key:
                raise ValueError(
                    f"write_batches: field '{name}' of batch {index} is "
                    f"{dtype} {list(array.shape[1:])} per row, batch 0's is "
                    f"{spec[name][0]} {list(spec[name][1])}")
            columns[name].append(array)
    rows = rows_per_batch * len(batches)
    with open(path, "wb") as out:
        out.write(MAGIC + struct.pack("<QI", rows, len(names)))
        for name in names:
            encoded = name.encode()
            dtype, dims = spec[name]
            out.write(struct.pack("<I", len(encoded)) + encoded)
            out.write(struct.pack("<II", DTYPE_CODES[dtype], len(dims)))
            out.write(b"".join(struct.pack("<Q", d) for d in dims))
        for name in names:
            for array in columns[name]:
                out.write(np.ascontiguousarray(array).tobytes())
    return rows


class AsdataError(ValueError):
    """A file that is not a well-formed asdata file; the message names the
    file and what is wrong with it."""


@dataclasses.dataclass
class Field:
    """One field of an asdata file: `values` has shape [rows, *shape] and
    the numpy type the dtype is stored as (bf16: its 16 bits as uint16;
    `floats()` widens them exactly to float32)."""
    name: str
    dtype: str
    shape: tuple
    values: np.ndarray

    def floats(self):
        if self.dtype == "bf16":
            return (self.values.astype(np.uint32) << 16).view(np.float32)
        return self.values


def read_asdata(path):
    """Reads an asdata file whole: a list of `Field`s in the file's order,
    each holding every row. Raises AsdataError naming what is wrong, with
    the checks the training binary makes of the header and the sizes."""
    with open(path, "rb") as f:
        data = f.read()
    where = f"asdata file '{path}'"
    if data[:8] != MAGIC:
        raise AsdataError(f"{where} starts with {data[:8]!r}, not the magic "
                          f"{MAGIC!r}; write it with write_batches")
    offset = 8

    def take(fmt, what):
        nonlocal offset
        size = struct.calcsize(fmt)
        if offset + size > len(data):
            raise AsdataError(f"{where} is truncated: it ends at byte "
                              f"{len(data)} inside {what}")
        values = struct.unpack_from(fmt, data, offset)
        offset += size
        return values

    rows, count = take("<QI", "the header")
    if rows == 0:
        raise AsdataError(f"{where} has 0 rows")
    specs = []
    for index in range(count):
        (length,) = take("<I", f"the name length of field {index}")
        name = bytes(take(f"<{length}s", f"the name of field {index}")[0])
        name = name.decode("utf-8", "replace")
        code, rank = take("<II", f"the dtype and rank of field '{name}'")
        if code not in DTYPE_NAMES:
            raise AsdataError(
                f"{where}: field '{name}' has dtype code {code}, not an "
                f"asrt_dtype (" + ", ".join(
                    f"{c} {n}" for c, n in DTYPE_NAMES.items()) + ")")
        dims = take(f"<{rank}Q", f"the shape of field '{name}'")
        specs.append((name, DTYPE_NAMES[code], tuple(dims)))
    fields = []
    for name, dtype, dims in specs:
        storage = np.dtype(_STORAGE[dtype])
        elements = rows * int(np.prod(dims, dtype=np.int64))
        size = elements * storage.itemsize
        if offset + size > len(data):
            raise AsdataError(
                f"{where} is truncated: field '{name}' ({dtype} "
                f"{list(dims)} per row, {rows} rows) needs {size} bytes at "
                f"byte {offset}, the file has {len(data)}")
        values = np.frombuffer(data, storage, elements, offset)
        fields.append(Field(name, dtype, dims,
                            values.reshape((rows,) + dims).copy()))
        offset += size
    if offset != len(data):
        raise AsdataError(f"{where} has {len(data) - offset} bytes after "
                          f"its last field's payload (at byte {offset})")
    return fields


def read_batches(path, rows_per_batch):
    """The inverse of write_batches: the file's rows cut into batches of
    `rows_per_batch` rows, each a dict from field name to numpy array
    (bf16 fields as their uint16 bits)."""
    fields = read_asdata(path)
    rows = fields[0].values.shape[0] if fields else 0
    if rows_per_batch <= 0 or rows % rows_per_batch:
        raise ValueError(f"read_batches: {rows} rows do not split into "
                         f"batches of {rows_per_batch}")
    return [{f.name: f.values[start:start + rows_per_batch] for f in fields}
            for start in range(0, rows, rows_per_batch)]


def _show(path, rows):
    fields = read_asdata(path)
    total = fields[0].values.shape[0] if fields else 0
    print(f"{path}: asdata, {total} rows, {len(fields)} fields, "
          f"{os.path.getsize(path)} bytes")
    for f in fields:
        values = f.floats()
        line = (f"  {f.name}: {f.dtype} {list(f.shape)} per row")
        if values.size:
            line += f", min {values.min():.6g} max {values.max():.6g}"
        print(line)
    for r in range(min(rows, total)):
        parts = []
        for f in fields:
            row = f.floats()[r].reshape(-1)
            shown = ", ".join(f"{v:.6g}" for v in row[:8])
            more = f", ... ({row.size} values)" if row.size > 8 else ""
            parts.append(f"{f.name} [{shown}{more}]")
        print(f"  row {r}: " + " ".join(parts))


def _from_npz(out, archive):
    with np.load(archive) as arrays:
        batch = {name: arrays[name] for name in arrays.files}
    rows = write_batches(out, [batch])
    print(f"{out}: {rows} rows, fields " + ", ".join(batch))


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(
        prog="python3 -m autoshard.data",
        description="Shows or writes the training binary's asdata files.")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser(
        "show", help="print an asdata file's fields and its first rows")
    show.add_argument("file")
    show.add_argument("--rows", type=int, default=2,
                      help="rows to print (default 2)")
    npz = commands.add_parser(
        "from-npz", help="write the arrays of a numpy .npz archive as an "
        "asdata file (one field per array, its first dimension the rows)")
    npz.add_argument("out")
    npz.add_argument("npz")
    args = parser.parse_args(argv)
    try:
        if args.command == "show":
            _show(args.file, args.rows)
        else:
            _from_npz(args.out, args.npz)
    except (OSError, ValueError) as error:
        parser.exit(1, f"autoshard.data: {error}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
