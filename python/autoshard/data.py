"""Writes the training binary's `--data` files (the asdata format of
docs/RuntimeABI.md): one field per input of the step, rows = the batches of
all steps one after the other, so that step s reads the s-th batch."""

import struct

import numpy as np

MAGIC = b"ASDATA01"

# asrt_dtype codes (runtime/include/autoshard/rt/abi.h) of the dtypes a
# step's inputs can have.
DTYPE_CODES = {"f32": 0, "i32": 1, "bf16": 2}


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
