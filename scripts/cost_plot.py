#!/usr/bin/env python3
"""Plots a --strategy=auto cost report: memory per rank and step time per plan.

  shard-opt --strategy=auto ... --cost-report=json --cost-report-file=r.json
  python3 scripts/cost_plot.py r.json out.png [--checkpointing none]
      [--default-schedule]

Two bar charts side by side, one bar per candidate plan (optionally only
those with one checkpointing mode): estimated memory per rank at its peak,
stacked by category (the cost report's at_peak, in the plan report's
categories; docs/CostModel.md, "Memory per rank"),
with the exact plan's figure where the compiler built one and the device's
memory as a line, and estimated step time stacked as compute, exposed
communication and exposed offload, on an axis cut at 5 times the fastest
plan (--time-clip). The chosen plan is outlined. The chart is drawn as SVG with the standard library; an output
ending in .png is converted with rsvg-convert (Debian's librsvg2-bin,
which scripts/setup.sh installs).
"""

import argparse
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile

# The estimate's peak by category (the cost report's at_peak, the plan
# report's categories): they add up to the plan's memory.
MEMORY = [("parameters", "#4c72b0"), ("master_weights", "#64b5cd"),
          ("optimizer_states", "#55a868"), ("gradients", "#ccb974"),
          ("activations", "#c44e52"), ("gathered_parameters", "#8172b3"),
          ("buffers", "#937860")]
TIME = [("compute", "#4c72b0"), ("exposed_communication", "#c44e52"),
        ("exposed_offload", "#937860")]


def legend_width(text):
    """About how wide a 10-pixel sans-serif label is."""
    return 6 * len(text) + 24


def bars(out, x0, y0, width, height, rows, parts, unit, scale, title, chosen,
         limit=None, clip=None):
    """One bar per row, stacked by parts. With clip, the axis ends there:
    longer bars are cut with a break mark and keep their full figure, so
    that one slow plan does not flatten the others."""
    out.append(f'<text x="{x0}" y="{y0 - 8}" font-size="13">'
               f'{html.escape(title)}</text>')
    totals = [sum(r.get(p, 0) for p, _ in parts) for _, r in rows]
    top = max(totals + ([limit] if limit else [])) or 1
    if clip and clip < top:
        top = clip
    bar = height / max(len(rows), 1)
    for i, (label, r) in enumerate(rows):
        y = y0 + i * bar
        out.append(f'<text x="{x0 - 6}" y="{y + bar * 0.7:.1f}" '
                   f'text-anchor="end" font-size="10">'
                   f'{html.escape(label)}</text>')
        x = x0
        for part, color in parts:
            w = min(r.get(part, 0) / top * width, x0 + width - x)
            if w > 0:
                out.append(f'<rect x="{x:.1f}" y="{y + 2:.1f}" '
                           f'width="{w:.1f}" height="{bar - 4:.1f}" '
                           f'fill="{color}"/>')
                x += w
        cut = totals[i] > top
        if cut:
            # A break: two white slashes across the bar's end.
            for dx in (-14, -9):
                out.append(f'<line x1="{x + dx:.1f}" y1="{y + bar - 1:.1f}" '
                           f'x2="{x + dx + 4:.1f}" y2="{y + 1:.1f}" '
                           f'stroke="white" stroke-width="2"/>')
        if i == chosen:
            out.append(f'<rect x="{x0}" y="{y + 1:.1f}" '
                       f'width="{x - x0:.1f}" '
                       f'height="{bar - 2:.1f}" fill="none" stroke="black" '
                       f'stroke-width="2"/>')
        note = " (axis cut)" if cut else ""
        if unit == "GiB" and (r.get("planned") or 0) > 0:
            note += f", planned {r['planned'] / scale:.1f} {unit}"
        out.append(f'<text x="{x + 4:.1f}" y="{y + bar * 0.7:.1f}" '
                   f'font-size="10">{totals[i] / scale:.1f} {unit}'
                   f'{note}</text>')
    if limit:
        x = x0 + limit / top * width
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" '
                   f'y2="{y0 + height}" stroke="black" stroke-dasharray="4"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + height + 11}" '
                   f'text-anchor="middle" font-size="9">device '
                   f'{limit / scale:.1f} {unit}</text>')
    # The legend under the chart, each entry as wide as its label; only
    # the parts some bar has.
    x, y = x0, y0 + height + 28
    for part, color in parts:
        if not any(r.get(part, 0) > 0 for _, r in rows):
            continue
        text = part.replace("_", " ")
        if x + legend_width(text) > x0 + width + 120 and x > x0:
            x, y = x0, y + 14
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" '
                   f'fill="{color}"/><text x="{x + 13}" y="{y}" '
                   f'font-size="10">{html.escape(text)}</text>')
        x += legend_width(text)


def device_memory(name):
    """The memory_bytes of data/devices/NAME.json, or None."""
    path = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "data", "devices", name + ".json")
    try:
        with open(path) as f:
            return float(json.load(f)["figures"]["memory_bytes"]["value"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report")
    parser.add_argument("out")
    parser.add_argument("--checkpointing", default="",
                        help="only the plans with this checkpointing mode")
    parser.add_argument("--default-schedule", action="store_true",
                        help="only the plans with the default bucket cap "
                             "and prefetch depth and no per-layer mix")
    parser.add_argument("--memory-limit", type=float, default=0,
                        help="the device's memory per rank in bytes, drawn "
                             "as a line (default: the report's device file "
                             "in data/devices, when there is one)")
    parser.add_argument("--time-clip", type=float, default=5,
                        help="end the time axis at this many times the "
                             "fastest plan's step time; longer bars are cut "
                             "(default 5; 0: never)")
    args = parser.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    rows, chosen = [], -1
    for i, c in enumerate(report["candidates"]):
        if args.checkpointing and \
                c["activation_checkpointing"] != args.checkpointing:
            continue
        if args.default_schedule and (
                "bucket=25MiB prefetch=1 " not in c["plan"] or
                "persist<=" in c["plan"]):
            continue
        if i == report["chosen"]:
            chosen = len(rows)
        label = " ".join(f for f in c["plan"].split()
                         if not f.startswith(("bucket=", "prefetch=")))
        memory = dict(c["memory_bytes"]["at_peak"])
        rows.append((label, dict(memory, **c["step_ms"],
                                 planned=c.get("planned_bytes"))))
    if not rows:
        sys.exit(f"error: {args.report} has no candidate to plot")
    height = 14 * len(rows)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="1500" '
           f'height="{height + 130}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14">' +
           html.escape(f'{report["model"]} on {report["nodes"]} x '
                       f'{report["ranks_per_node"]} {report["device"]}: '
                       'estimated memory per rank and step time') +
           '</text>']
    limit = args.memory_limit or device_memory(report["device"])
    fastest = min(r["total"] for _, r in rows)
    bars(out, 420, 50, 300, height, [(l, r) for l, r in rows], MEMORY, "GiB",
         2**30, "memory per rank (GiB)", chosen, limit)
    bars(out, 1060, 50, 260, height, [(l, r) for l, r in rows], TIME, "ms",
         1, "step time (ms)", chosen,
         clip=args.time_clip * fastest if args.time_clip > 0 else None)
    out.append("</svg>")
    svg = "\n".join(out) + "\n"
    if not args.out.endswith(".png"):
        with open(args.out, "w") as f:
            f.write(svg)
        return
    converter = shutil.which("rsvg-convert")
    if not converter:
        sys.exit("error: writing a PNG needs rsvg-convert (Debian: "
                 "librsvg2-bin, installed by scripts/setup.sh); or name an "
                 ".svg output")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plot.svg")
        with open(path, "w") as f:
            f.write(svg)
        proc = subprocess.run([converter, "--format=png", "-o", args.out,
                               path], stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.exit(f"error: rsvg-convert failed: {proc.stderr}")


if __name__ == "__main__":
    main()
