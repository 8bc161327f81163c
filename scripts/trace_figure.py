#!/usr/bin/env python3
"""Draws one step of a training binary's --trace file as an SVG timeline.

  python3 scripts/trace_figure.py trace.json out.svg [--step N] [--title T]

One pair of rows per rank: the main thread (compute in grey, issuing an
asynchronous collective in orange, waiting for one in red) and the
communication thread (collectives in blue). Standard library only.
"""

import argparse
import json
import sys

COLORS = {"compute": "#b0b0b0", "issue": "#f0a030", "wait": "#d03030",
          "comm": "#3070d0"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--step", type=int, default=-1,
                        help="which step (0-based; default: the last)")
    parser.add_argument("--title", default="")
    args = parser.parse_args()

    with open(args.trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    spans = [e for e in events if e.get("ph") == "X"]
    steps = sorted((e for e in spans if e.get("cat") == "step" and
                    e["pid"] == 0), key=lambda e: e["ts"])
    if not steps:
        sys.exit(f"error: {args.trace} has no step events on rank 0")
    try:
        window = steps[args.step]
    except IndexError:
        sys.exit(f"error: {args.trace} has {len(steps)} steps; --step "
                 f"{args.step} is not one of them")
    begin, end = window["ts"], window["ts"] + window["dur"]
    ranks = sorted({e["pid"] for e in spans})

    width, left, row, gap = 1000, 150, 18, 10
    height = 40 + len(ranks) * (2 * row + gap) + 30
    scale = (width - left - 10) / (end - begin)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="13">{args.title}</text>']
    for i, rank in enumerate(ranks):
        y0 = 32 + i * (2 * row + gap)
        for j, (tid, label) in enumerate(((1, "main"), (2, "communication"))):
            y = y0 + j * row
            out.append(f'<text x="10" y="{y + 13}">rank {rank} {label}</text>')
            for e in spans:
                if e["pid"] != rank or e["tid"] != tid:
                    continue
                color = COLORS.get(e.get("cat"))
                s, t = max(e["ts"], begin), min(e["ts"] + e["dur"], end)
                if not color or t <= s:
                    continue
                x, w = left + (s - begin) * scale, max((t - s) * scale, 0.5)
                out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" '
                           f'height="{row - 4}" fill="{color}"><title>'
                           f'{e["name"]} {e["dur"]:.0f} us</title></rect>')
    y = height - 12
    x = left
    for cat, label in (("compute", "compute"), ("issue", "issue"),
                       ("wait", "wait (exposed)"),
                       ("comm", "collective on the communication thread")):
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" '
                   f'fill="{COLORS[cat]}"/><text x="{x + 14}" y="{y}">'
                   f'{label}</text>')
        x += 30 + 7 * len(label)
    out.append(f'<text x="{width - 10}" y="{y}" text-anchor="end">'
               f'{(end - begin) / 1000:.1f} ms</text>')
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
