"""autoshard.data's reader against its writer, and the reader's refusals of
damaged files (the checks the training binary makes), one line each."""

import struct
import sys

import numpy as np

from autoshard.data import AsdataError, read_asdata, read_batches, write_batches

work = sys.argv[1]
rng = np.random.default_rng(0)
batches = [{"x": rng.standard_normal((4, 3, 2)), "ids": rng.integers(0, 9, (4, 5)),
            "y": rng.integers(0, 3, 4)} for _ in range(3)]
good = f"{work}/good.asdata"
print("rows", write_batches(good, batches))
for field in read_asdata(good):
    print("field", field.name, field.dtype, list(field.shape),
          field.values.dtype, list(field.values.shape))
back = read_batches(good, 4)
same = all(np.array_equal(b[k], a[k].astype(b[k].dtype)) for a, b in zip(batches, back)
           for k in a)
print("batches", len(back), "equal" if same else "DIFFER")

data = open(good, "rb").read()
# The first field's dtype code sits after the header (20 bytes) and its name.
dtype_at = 20 + 4 + len("x")
cases = {
    "magic": b"ASDATA02" + data[8:],
    "header": data[:15],
    "dtype": data[:dtype_at] + struct.pack("<I", 9) + data[dtype_at + 4:],
    "payload": data[:-1],
    "trailing": data + b"\0",
    "rows": data[:8] + struct.pack("<Q", 0) + data[16:],
}
for name, content in cases.items():
    path = f"{work}/{name}.asdata"
    open(path, "wb").write(content)
    try:
        read_asdata(path)
        print(name, "accepted")
    except AsdataError as error:
        print(f"{name}: {error}".replace(work + "/", ""))
try:
    read_batches(good, 5)
    print("split accepted")
except ValueError as error:
    print("split:", error)

# bf16 is kept as its 16 bits and widened exactly by floats().
bf16 = f"{work}/bf16.asdata"
bits = np.array([[0x3F80, 0xC000]], np.uint16)  # 1.0, -2.0
with open(bf16, "wb") as out:
    out.write(b"ASDATA01" + struct.pack("<QI", 1, 1) + struct.pack("<I", 1) + b"h"
              + struct.pack("<IIQ", 2, 1, 2) + bits.tobytes())
field = read_asdata(bf16)[0]
print("bf16", field.dtype, field.values.dtype, field.floats().tolist())
