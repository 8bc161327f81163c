#!/usr/bin/env python3
"""Byte-level tokenizer: text file -> nanoGPT-style uint16 token files.

  scripts/tokenize.py data/corpus/kjv-genesis-exodus.txt OUT_DIR [--val-fraction 0.1]

Writes OUT_DIR/train.bin and OUT_DIR/val.bin (little-endian uint16 token
ids, one per byte: vocabulary 256) and prints the unigram entropy of the
training tokens in nats, the cross-entropy a model that ignores context
cannot beat. Standard library only.
"""

import argparse
import array
import collections
import math
import os
import sys


def unigram_entropy(tokens):
    counts = collections.Counter(tokens)
    total = len(tokens)
    return -sum(c / total * math.log(c / total) for c in counts.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("text")
    parser.add_argument("out_dir")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    args = parser.parse_args()
    if not 0.0 <= args.val_fraction < 1.0:
        sys.exit(f"--val-fraction must be in [0, 1), got {args.val_fraction}")

    with open(args.text, "rb") as f:
        data = f.read()
    if not data:
        sys.exit(f"{args.text}: empty")
    split = int(len(data) * (1.0 - args.val_fraction))
    os.makedirs(args.out_dir, exist_ok=True)
    for name, part in (("train", data[:split]), ("val", data[split:])):
        tokens = array.array("H", list(part))  # uint16, one token per byte
        if sys.byteorder != "little":
            tokens.byteswap()
        with open(os.path.join(args.out_dir, name + ".bin"), "wb") as f:
            tokens.tofile(f)
    entropy = unigram_entropy(data[:split])
    print(f"tokens: train {split}, val {len(data) - split}; vocabulary 256 "
          f"(bytes), {len(set(data))} used")
    print(f"unigram entropy: {entropy:.4f} nats ({entropy / math.log(2):.4f} "
          f"bits) per token")


if __name__ == "__main__":
    main()
