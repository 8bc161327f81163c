"""autoshard.data.write_batches: what it writes (read back field by field)
and what it refuses, one line each."""

import struct
import sys

import numpy as np
import torch

from autoshard.data import write_batches

path = sys.argv[1]
batches = [{"x": torch.full((2, 3), float(s)), "y": torch.tensor([s, s + 1])}
           for s in range(3)]
rows = write_batches(path, batches)
data = open(path, "rb").read()
magic, count, fields = data[:8], *struct.unpack_from("<QI", data, 8)
print(f"written: {magic.decode()} rows {count} fields {fields} (returned {rows})")
off = 20
for _ in range(fields):
    (n,) = struct.unpack_from("<I", data, off)
    name = data[off + 4:off + 4 + n].decode()
    dtype, rank = struct.unpack_from("<II", data, off + 4 + n)
    dims = struct.unpack_from(f"<{rank}Q", data, off + 12 + n)
    off += 12 + n + 8 * rank
    print(f"field {name} dtype {dtype} dims {list(dims)}")
x = np.frombuffer(data, "<f4", 6 * 3, off)
y = np.frombuffer(data, "<i4", 6, off + 4 * 18)
print("x rows", x.reshape(6, 3)[:, 0].tolist(), "y", y.tolist())

bad = {
    "empty": [],
    "fields": [{"x": torch.zeros(2, 3)}, {"z": torch.zeros(2, 3)}],
    "rows": [{"x": torch.zeros(2, 3), "y": torch.zeros(3)}],
    "shape": [{"x": torch.zeros(2, 3)}, {"x": torch.zeros(2, 4)}],
    "dtype": [{"x": torch.zeros(2, 3)}, {"x": torch.zeros(2, 3, dtype=torch.int64)}],
    "scalar": [{"x": torch.tensor(1.0)}],
    "range": [{"y": torch.tensor([2**40, 0])}],
    "complex": [{"x": torch.zeros(2, dtype=torch.complex64)}],
}
for name, b in bad.items():
    try:
        write_batches(path + "." + name, b)
        print(f"{name}: accepted")
    except ValueError as e:
        print(f"{name}: {e}")
