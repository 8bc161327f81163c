#!/usr/bin/env python3
"""Writes the seed corpora of the runtime's fuzz targets (runtime/fuzz):
SEEDS/<target>/<name>, each a valid input for the step the target reads it
against, and a few that break one rule each, so that the fuzzer starts past
the first checks. scripts/fuzz.sh adds a real checkpoint and step manifest
from a training binary of the build when there is one.

    make-seeds.py SEEDS
"""

import json
import math
import os
import struct
import sys

# Step manifests: the targets' own steps, and the records a compiled step
# has besides (memory plan, flat shards, offload, aliases, hypers).
MANIFESTS = {
    "classifier": (
        "autoshard-manifest 1\nabi 6\nstep s\nstrategy ddp\ngrid 2\n"
        "arg 0 param w f32 5x3 init=zeros\n"
        "arg 1 input x f32 2x3 batch_dim=0 global=4\n"
        "arg 2 input seq bf16 2x2 batch_dim=0 global=4\n"
        "arg 3 label y i32 2 batch_dim=0 global=4 classes=5 ignore_index=-100\n"
        "result 0 param w f32 5x3 updates=0\n"
        "result 1 loss loss f32 scalar\nend\n"),
    "lm": (
        "autoshard-manifest 1\nabi 6\nstep lm\nstrategy ddp\ngrid 2\n"
        "arg 0 param wte f32 50x4 init=normal:0.02\n"
        "arg 1 input ids i32 2x8 batch_dim=0 global=4 classes=50\n"
        "arg 2 label labels i32 2x8 batch_dim=0 global=4 classes=50\n"
        "result 0 param wte f32 50x4 updates=0\n"
        "result 1 loss loss f32 scalar\nend\n"),
    "zero3": (
        "autoshard-manifest 1\nabi 6\nstep s\nstrategy zero3\ngrid 2\n"
        "arg 0 param w f32 8 full=4x4 shard_axes=1 init=normal:0.1\n"
        "arg 1 param e bf16 3x2 init=zeros aliases=head.weight\n"
        "arg 2 opt_state w.m f32 8 full=4x4 shard_axes=1 init=load\n"
        "arg 3 opt_state step i32 scalar init=zeros\n"
        "result 0 param w f32 8 full=4x4 shard_axes=1 updates=0\n"
        "result 1 param e bf16 3x2 updates=1\n"
        "result 2 opt_state w.m f32 8 full=4x4 shard_axes=1 updates=2\n"
        "result 3 opt_state step i32 scalar updates=3\n"
        "result 4 loss loss f32 scalar\nend\n"),
}


# The MANIFEST of a checkpoint of step 1 of a one-rank ZeRO-3 MLP (the
# driver tests' fake_zero_ws1), without its shard file: scripts/fuzz.sh
# adds the whole checkpoint when a build has that binary.
CHECKPOINT_MANIFEST = 'autoshard-checkpoint 1\nstep 1\nseed 0\ndata synthetic\nstrategy zero3\ngrid 1\nworld 1\nplan ac26c7a5e2fa132b\nmodel 2687c37dac2f4b5d\nfile rank-00000.safetensors bytes=1592 crc32=e13c2f18\ntensor fc1.weight param f32 5x8\nblock fc1.weight begin=0 count=40 file=rank-00000.safetensors offset=1032 crc32=dc6ae0a9\ntensor fc1.bias param f32 5\nblock fc1.bias begin=0 count=5 file=rank-00000.safetensors offset=1192 crc32=f2ec4fa0\ntensor fc2.weight param f32 4x5\nblock fc2.weight begin=0 count=20 file=rank-00000.safetensors offset=1212 crc32=1146f859\ntensor fc2.bias param f32 4\nblock fc2.bias begin=0 count=4 file=rank-00000.safetensors offset=1292 crc32=2fcb2ed1\ntensor scale param f32 scalar\nblock scale begin=0 count=1 file=rank-00000.safetensors offset=1308 crc32=3ae62959\ntensor fc1.weight.momentum opt_state f32 5x8\nblock fc1.weight.momentum begin=0 count=40 file=rank-00000.safetensors offset=1312 crc32=e29121fc\ntensor fc1.bias.momentum opt_state f32 5\nblock fc1.bias.momentum begin=0 count=5 file=rank-00000.safetensors offset=1472 crc32=05dee31f\ntensor fc2.weight.momentum opt_state f32 4x5\nblock fc2.weight.momentum begin=0 count=20 file=rank-00000.safetensors offset=1492 crc32=9424843d\ntensor fc2.bias.momentum opt_state f32 4\nblock fc2.bias.momentum begin=0 count=4 file=rank-00000.safetensors offset=1572 crc32=e6038a54\ntensor scale.momentum opt_state f32 scalar\nblock scale.momentum begin=0 count=1 file=rank-00000.safetensors offset=1588 crc32=b1405684\nend crc32=9714139b\n'


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] -> file bytes."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def f32(values):
    return b"".join(struct.pack("<f", v) for v in values)


def bf16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def asdata(rows, fields):
    """fields: [(name, code, dims, payload)]; codes f32 0, i32 1, bf16 2."""
    out = b"ASDATA01" + struct.pack("<QI", rows, len(fields))
    for name, code, dims, _ in fields:
        out += struct.pack("<I", len(name)) + name.encode()
        out += struct.pack("<II", code, len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
    return out + b"".join(payload for *_, payload in fields)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]

    def put(target, name, data):
        os.makedirs(os.path.join(root, target), exist_ok=True)
        mode = "w" if isinstance(data, str) else "wb"
        with open(os.path.join(root, target, name), mode) as out:
            out.write(data)

    for name, text in MANIFESTS.items():
        put("manifest", name, text)
    put("manifest", "memory",
        MANIFESTS["zero3"].replace(
            "grid 2\n", "grid 2\nflops 4096\nmemory peak=4096 persistent=1024 "
            "step=3072 communication=512\n"))
    put("manifest", "2d-grid", MANIFESTS["zero3"].replace("grid 2", "grid 2x2"))

    put("checkpoint", "manifest-only", CHECKPOINT_MANIFEST)

    w = [0.1 * i for i in range(16)]
    params = [("w", "F32", [4, 4], f32(w)),
              ("head.weight", "BF16", [3, 2], bf16([1, 2, 3, 4, 5, 6])),
              ("w.m", "F32", [4, 4], f32(w[::-1]))]
    put("safetensors", "zero3", safetensors(params, {"step": "s"}))
    put("safetensors", "by-name",
        safetensors([("e", "BF16", [3, 2], bf16([0] * 6))] + params[::2]))
    put("safetensors", "nan",
        safetensors([params[0], params[1],
                     ("w.m", "F32", [4, 4], f32([math.nan] * 16))]))
    put("safetensors", "empty-header", safetensors([]))

    # Token files: uint16 ids below the step's vocabulary of 50.
    put("tokens", "ids", b"".join(struct.pack("<H", (7 * i) % 50)
                                  for i in range(64)))
    put("tokens", "short", b"".join(struct.pack("<H", i) for i in range(9)))

    # asdata files of the classifier's fields: x f32 [3], seq bf16 [2],
    # y i32 (with ignored labels).
    rows = 8
    fields = [("x", 0, [3], f32([0.5 * i for i in range(rows * 3)])),
              ("seq", 2, [2], bf16([1.0] * (rows * 2))),
              ("y", 1, [], b"".join(struct.pack("<i", v) for v in
                                    [0, 1, 2, 3, 4, -100, 1, 0]))]
    put("asdata", "classifier", asdata(rows, fields))
    put("asdata", "one-row", asdata(1, [(n, c, d, p[:len(p) // rows])
                                        for n, c, d, p in fields]))


if __name__ == "__main__":
    main()
