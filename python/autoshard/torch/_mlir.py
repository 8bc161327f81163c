"""Text of the `train` dialect: tensor types, attributes and dense constants
as the MLIR parser reads them. Operations are written in MLIR's generic form
("train.add"(%a, %b) {..} : (..) -> ..), which every op parses the same way;
shard-opt prints them back in their custom forms."""

import math
import struct

import numpy as np
import torch

# torch dtype -> element type of the step (int64 ids and labels are i32).
ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.int64: "i32",
    torch.int32: "i32",
    torch.bool: "i1",
}


def element_type(dtype):
    return ELEMENT_TYPES.get(dtype)


def tensor_type(shape, elem):
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{elem}>"


def string(text):
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def number(value):
    """A finite float as MLIR's lexer reads it (a digit before any exponent
    and a point in the mantissa: 1.0e-08, not 1e-08)."""
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def f32(value):
    """An f32 attribute; non-finite values in the hex form MLIR requires."""
    value = float(value)
    if math.isfinite(value):
        return f"{number(value)} : f32"
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return f"0x{bits:08X} : f32"


def f64(value):
    if not math.isfinite(float(value)):
        raise ValueError(f"a non-finite setting ({value})")
    return f"{number(value)} : f64"


def i64(value):
    return f"{int(value)} : i64"


def i64_array(values):
    return "array<i64" + "".join(
        (": " if i == 0 else ", ") + str(int(v))
        for i, v in enumerate(values)) + ">"


def attr_dict(attrs):
    if not attrs:
        return ""
    parts = []
    for key, value in attrs.items():
        parts.append(key if value is None else f"{key} = {value}")
    return " {" + ", ".join(parts) + "}"


def dense(tensor, elem):
    """`dense<...> : tensor<...>` of a constant tensor in the element type
    `elem` (f32, bf16, i32 or i1): a splat when every element is equal,
    else the little-endian bytes in hex (i1 as packed bits, as MLIR keeps
    them)."""
    t = tensor.detach().cpu()
    ty = tensor_type(tuple(t.shape), elem)
    if elem == "i1":
        array = t.to(torch.bool).numpy().reshape(-1)
    elif elem == "i32":
        wide = t.to(torch.int64)
        if wide.numel() and (wide.min() < -2**31 or wide.max() >= 2**31):
            raise ValueError("an integer constant does not fit in i32")
        array = wide.to(torch.int32).numpy().reshape(-1).astype("<i4")
    elif elem == "bf16":
        array = (t.to(torch.bfloat16).contiguous().view(torch.int16).numpy()
                 .reshape(-1).view(np.uint16).astype("<u2"))
    else:
        array = t.to(torch.float32).numpy().reshape(-1).astype("<f4")
    if array.size and (array == array[0]).all() or array.size == 1:
        first = array[0]
        if elem == "i1":
            text = "true" if first else "false"
        elif elem == "i32":
            text = str(int(first))
        elif elem == "bf16":
            bits = int(first)
            text = f"0x{bits:04X}"
        else:
            bits = struct.unpack("<I", struct.pack("<f", float(first)))[0]
            text = f"0x{bits:08X}"
        return f"dense<{text}> : {ty}"
    if elem == "i1":
        data = np.packbits(array.astype(np.uint8), bitorder="little").tobytes()
    else:
        data = array.tobytes()
    return f'dense<"0x{data.hex().upper()}"> : {ty}'
