#!/usr/bin/env python3
"""The loss of test/Pipelines/Inputs/causal-lm-loss-step.mlir in numpy, for
test/e2e/causal-lm-loss.test.

  causal_lm_loss.py data DIR --labels equal|unequal|empty-rank|bad [--seed S]
      writes DIR/init.safetensors (the step's parameters) and
      DIR/batch.asdata (x [4, 4, 8] f32 and labels [4, 4] i32, some of
      them -100, the ignore index):
        equal       every sequence ignores as many positions (its last, by
                    the shift, and one more), so each of 2 ranks counts the
                    same number of positions
        unequal     sequence 0 ignores two more positions than the others,
                    so rank 0 of 2 counts fewer than rank 1
        empty-rank  sequences 2 and 3 (rank 1's of 2) ignore every position
        bad         as equal, with one label -1: neither a class nor -100
  causal_lm_loss.py check DIR LOG --ranks N [--grads FILE] [--rtol R]
      LOG's step 1 loss (the binary's, on DIR's parameters and batch)
      equals the numpy loss of N data-parallel ranks: each rank's mean
      over its counted positions (0 when it counts none), averaged over
      the ranks, PyTorch DDP's semantics (the mean over the whole batch
      when N is 1); with --grads, FILE (the binary's --save-grads of a
      step compiled with --expose-gradients) holds the gradients of that
      loss: each rank's (zero from an ignored position, all zero from a
      rank that counts none), averaged over the ranks.
  causal_lm_loss.py differ DIR --rtol R
      the 1-rank and 2-rank losses of DIR's data differ by more than R
      (the case tells the two semantics apart)

The loss is written from the step's description, independently of the
compiler: logits = tanh(x w1^T + b1) w2^T; the labels padded at the end of
each sequence with -100 and shifted left by one; cross-entropy over the
positions whose shifted label is not -100.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opcheck import write_asdata  # noqa: E402
from reference_model import np, read_safetensors, write_safetensors  # noqa: E402

BATCH, SEQ, FEATURES, HIDDEN, VOCAB = 4, 4, 8, 16, 10
IGNORE = -100


def write_data(args):
    rng = np.random.default_rng(args.seed)
    f32 = lambda a: np.asarray(a, np.float32)
    params = {
        "fc.weight": f32(rng.normal(0, 0.35, (HIDDEN, FEATURES))),
        "fc.bias": f32(rng.normal(0, 0.1, (HIDDEN,))),
        "head.weight": f32(rng.normal(0, 0.5, (VOCAB, HIDDEN))),
    }
    x = f32(rng.normal(0, 1, (BATCH, SEQ, FEATURES)))
    labels = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32)
    # Position 0's label is shifted out; the shift ignores the last one.
    if args.labels in ("equal", "bad"):
        labels[:, 2] = IGNORE
        if args.labels == "bad":
            labels[1, 3] = -1
    elif args.labels == "unequal":
        labels[0, 1:3] = IGNORE
    elif args.labels == "empty-rank":
        labels[2:, 1:] = IGNORE
    os.makedirs(args.dir, exist_ok=True)
    write_safetensors(os.path.join(args.dir, "init.safetensors"),
                      {k: v.astype(np.float64) for k, v in params.items()})
    write_asdata(os.path.join(args.dir, "batch.asdata"),
                 [("x", x.astype(np.float64)), ("labels", labels)])


def rank_means(dir_, ranks):
    """Each rank's mean loss and its gradients (name.grad -> array)."""
    params, _ = read_safetensors(os.path.join(dir_, "init.safetensors"))
    x, labels = read_batch(os.path.join(dir_, "batch.asdata"))
    w1, b1, w2 = params["fc.weight"], params["fc.bias"], params["head.weight"]
    shifted = np.concatenate(
        [labels[:, 1:], np.full((BATCH, 1), IGNORE, np.int64)], axis=1)
    means, grads = [], []
    rows = BATCH // ranks
    for r in range(ranks):
        xr = x[r * rows:(r + 1) * rows].reshape(-1, FEATURES)
        h = np.tanh(xr @ w1.T + b1)
        z = h @ w2.T
        y = shifted[r * rows:(r + 1) * rows].reshape(-1)
        counted = y != IGNORE
        dz = np.zeros_like(z)
        if counted.any():
            m = z.max(-1, keepdims=True)
            p = np.exp(z - m) / np.exp(z - m).sum(-1, keepdims=True)
            picked = np.log(p[counted, y[counted]])
            means.append(float(-picked.mean()))
            onehot = np.zeros_like(z)
            onehot[np.arange(len(y))[counted], y[counted]] = 1
            dz[counted] = (p - onehot)[counted] / counted.sum()
        else:
            means.append(0.0)  # abi.h: no counted position, loss 0
        dpre = (dz @ w2) * (1 - h ** 2)
        grads.append({"head.weight.grad": dz.T @ h,
                      "fc.weight.grad": dpre.T @ xr,
                      "fc.bias.grad": dpre.sum(0)})
    return means, grads


def expected_loss(dir_, ranks):
    return float(np.mean(rank_means(dir_, ranks)[0]))


def expected_grads(dir_, ranks):
    per_rank = rank_means(dir_, ranks)[1]
    return {k: sum(g[k] for g in per_rank) / ranks for k in per_rank[0]}


def read_batch(path):
    """x and labels of the asdata file write_data wrote (float64, int64)."""
    with open(path, "rb") as f:
        data = f.read()
    # The header is fixed by write_data: two fields of known shapes.
    x_bytes = BATCH * SEQ * FEATURES * 4
    y_bytes = BATCH * SEQ * 4
    payload = data[len(data) - x_bytes - y_bytes:]
    x = np.frombuffer(payload[:x_bytes], "<f4").reshape(BATCH, SEQ, FEATURES)
    y = np.frombuffer(payload[x_bytes:], "<i4").reshape(BATCH, SEQ)
    return x.astype(np.float64), y.astype(np.int64)


def step1_loss(log):
    with open(log) as f:
        m = re.search(r"^step 1 loss (\S+) ", f.read(), re.M)
    if not m:
        sys.exit(f"{log}: no step 1 loss")
    return float(m.group(1))


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("data")
    p.add_argument("dir")
    p.add_argument("--labels", choices=["equal", "unequal", "empty-rank", "bad"],
                   required=True)
    p.add_argument("--seed", type=int, default=7)
    p = sub.add_parser("check")
    p.add_argument("dir")
    p.add_argument("log")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--grads")
    p.add_argument("--rtol", type=float, default=1e-5)
    p = sub.add_parser("differ")
    p.add_argument("dir")
    p.add_argument("--rtol", type=float, required=True)
    args = parser.parse_args()
    if args.cmd == "data":
        write_data(args)
    elif args.cmd == "check":
        got, want = step1_loss(args.log), expected_loss(args.dir, args.ranks)
        means = rank_means(args.dir, args.ranks)[0]
        if rel(got, want) > args.rtol:
            sys.exit(f"step 1 loss {got} on {args.ranks} rank(s), numpy "
                     f"{want} (the ranks' means {means}; relative error "
                     f"{rel(got, want):.3g} > {args.rtol})")
        report = "loss ok"
        if args.grads:
            binary, _ = read_safetensors(args.grads)
            for name, ref in expected_grads(args.dir, args.ranks).items():
                err = np.abs(binary[name] - ref).max()
                # f32 sums of a few terms: 1e-5 of the largest element.
                if err > 1e-5 * np.abs(ref).max() + 1e-7:
                    sys.exit(f"{name}: max abs error {err:.3g} against numpy "
                             f"(max |grad| {np.abs(ref).max():.3g})")
            report += ", gradients ok"
        print(f"causal_lm_loss: {args.ranks} rank(s): {report}")
    else:
        one, two = expected_loss(args.dir, 1), expected_loss(args.dir, 2)
        if rel(one, two) <= args.rtol:
            sys.exit(f"1 rank {one} and 2 ranks {two} do not differ by more "
                     f"than {args.rtol}")
        print("causal_lm_loss: 1 and 2 ranks differ")


if __name__ == "__main__":
    main()
