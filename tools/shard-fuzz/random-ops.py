#!/usr/bin/env python3
"""Writes random train ops, one small module per file, as fuzzing seeds.

Each file is a function whose arguments feed one op of the train dialect in
generic form, with operand and result types of random ranks, sizes and
element types, attributes from a list of edge values (0, -1, INT64_MAX,
NaN, unknown grids and axes), and now and then a wrong segment size or a
type that is not a ranked tensor. Almost all are invalid: they exercise
the ops' verifiers and shape rules, which must answer with a diagnostic.
The ops and their operands are read from TrainOps.td, so new ops are
covered without editing this file.

  random-ops.py TRAINOPS_TD OUT_DIR COUNT [SEED]
"""
import os
import random
import re
import sys


def split_top(text):
    """Splits `a, B<c, d>:$e, f` at its top-level commas."""
    items, depth, cur = [], 0, ""
    for c in text:
        depth += c in "<(["
        depth -= c in ">)]"
        if c == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        items.append(cur.strip())
    return items


def read_ops(td_path):
    """(mnemonic, arguments, results) of every op in TrainOps.td."""
    text = open(td_path).read()
    classes = {}
    ops = []
    for block in re.split(r"\n(?=def |class )", text):
        ins = re.search(r"let arguments = \(ins(.*?)\);", block, re.S)
        outs = re.search(r"let results = \(outs(.*?)\);", block, re.S)
        m = re.match(r"class (\w+)", block)
        if m:
            classes[m.group(1)] = (ins, outs)
            continue
        m = re.match(r'def \w+\s*:\s*(\w+)<"(\w+)"', block)
        if not m:
            continue
        base, mnemonic = m.groups()
        base_ins, base_outs = classes.get(base, (None, None))
        ins = ins or base_ins
        outs = outs or base_outs
        ops.append((mnemonic, split_top(ins.group(1)) if ins else [],
                    split_top(outs.group(1)) if outs else []))
    return ops


ELEMENTS = ["f32", "f32", "f32", "bf16", "i32", "f16", "i64"]
ODD_TYPES = ["tensor<*xf32>", "memref<2xf32>", "f32", "vector<2xf32>",
             "tensor<?x4xf32>", "!train.pending<tensor<4xf32>>"]


def random_type(rng):
    if rng.random() < 0.03:
        return rng.choice(ODD_TYPES)
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
    dims = [rng.choice([0, 1, 2, 2, 3, 4, 4, 5, 8, 16]) for _ in range(rank)]
    return "tensor<" + "".join(f"{d}x" for d in dims) + rng.choice(ELEMENTS) + ">"


def random_attr(rng, kind):
    if "F32Attr" in kind:
        return rng.choice(["1.0 : f32", "0.0 : f32", "-1.0 : f32",
                           "0x7FC00000 : f32", "1.0e+38 : f32"])
    if "I64Attr" in kind:
        return rng.choice(["0 : i64", "1 : i64", "2 : i64", "-1 : i64",
                           "9223372036854775807 : i64"])
    if "DenseI16ArrayAttr" in kind:
        return rng.choice(["array<i16>", "array<i16: 0>", "array<i16: 1>",
                           "array<i16: 0, 1>", "array<i16: -1>",
                           "array<i16: 1, 0>", "array<i16: 0, 0>",
                           "array<i16: 32767>"])
    if "FlatSymbolRefAttr" in kind:
        return rng.choice(["@world", "@nowhere", "@f"])
    if "Kind" in kind:
        return rng.choice(["#train<collective_kind all_reduce>",
                           "#train<collective_kind all_gather_shards>",
                           "#train<collective_kind reduce_scatter_shards>"])
    if "Reduction" in kind:
        return rng.choice(["#shard<partial sum>", "#shard<partial mean>",
                           "#shard<partial max>"])
    return rng.choice(["unit", "true", "0 : i64", '"x"'])


def count(rng, kind):
    if kind.startswith("Optional"):
        return rng.choice([0, 1])
    if kind.startswith("Variadic"):
        return rng.choice([0, 1, 2, 3])
    return 1


def random_module(rng, ops):
    mnemonic, ins, outs = rng.choice(ops)
    operand_types, attrs, segments = [], [], []
    for item in ins:
        m = re.match(r"(.*):\$(\w+)$", item)
        if not m:
            continue
        kind, name = m.groups()
        if re.search(r"Attr|Kind|Reduction", kind):
            if rng.random() < 0.9:
                attrs.append(f"{name} = {random_attr(rng, kind)}")
            continue
        n = count(rng, kind)
        segments.append(n)
        operand_types += [random_type(rng) for _ in range(n)]
    if rng.random() < 0.5 and any(i.startswith(("Optional", "Variadic"))
                                  for i in ins):
        attrs.append("operandSegmentSizes = array<i32: " +
                     ", ".join(map(str, segments)) + ">")
    result_types = []
    for item in outs:
        m = re.match(r"(.*):\$(\w+)$", item)
        if m:
            result_types += [random_type(rng) for _ in range(count(rng, m.group(1)))]
    # Shapes that agree get further into the shape rules.
    if operand_types and result_types and rng.random() < 0.5:
        result_types = [operand_types[0]] * len(result_types)
    if len(operand_types) > 1 and rng.random() < 0.4:
        operand_types = [operand_types[0]] * len(operand_types)
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operand_types))
    operands = ", ".join(f"%a{i}" for i in range(len(operand_types)))
    attr_dict = " {" + ", ".join(attrs) + "}" if attrs else ""
    lhs = (f"%r:{len(result_types)} = " if len(result_types) > 1
           else "%r = " if result_types else "")
    return (f"shard.grid @world(shape = {rng.choice(['2', '4', '2x2', '1'])})\n"
            f"func.func @f({params}) {{\n"
            f'  {lhs}"train.{mnemonic}"({operands}){attr_dict} : '
            f'({", ".join(operand_types)}) -> ({", ".join(result_types)})\n'
            f"  return\n}}\n")


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    td_path, out_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) == 5 else 1)
    ops = read_ops(td_path)
    if not ops:
        sys.exit(f"random-ops.py: no ops found in {td_path}")
    os.makedirs(out_dir, exist_ok=True)
    for i in range(n):
        with open(os.path.join(out_dir, f"random-op-{i:04d}.mlir"), "w") as f:
            f.write(random_module(rng, ops))


if __name__ == "__main__":
    main()
