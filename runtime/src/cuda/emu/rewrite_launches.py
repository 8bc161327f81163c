#!/usr/bin/env python3
"""Turns a CUDA kernel file into C++ for the CUDA emulator (CudaEmu.h).

Each launch `kernel<<<grid, block, shmem, stream>>>(args);` becomes
`::asrt_emu::launchKernel([](auto... a) { kernel(a...); }, grid, block,
shmem, stream, args);`: the arguments are copied at the launch, as CUDA
copies a kernel's parameters, and every emulated thread calls the kernel
with them when the stream runs the grid. All four launch parameters must
be given. CUDA's `__noinline__`
becomes the GNU attribute (a macro cannot do it: libstdc++ spells that
attribute `__noinline__`). Everything else is copied as it is, and a
#line directive keeps diagnostics pointing at the .cu file.

usage: rewrite_launches.py input.cu output.cpp
"""
import re
import sys


def matching(text, start, open_ch, close_ch):
    """Index just past the bracket that closes the one at text[start]."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        elif ch in "\"'":
            i = text.index(ch, i + 1)  # the backend's launches hold no escapes
        i += 1
    raise ValueError("unbalanced %s%s" % (open_ch, close_ch))


def top_level_commas(text):
    """Commas of `text` outside parentheses, brackets and braces."""
    depth = 0
    commas = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
    return commas


def kernel_start(text, end):
    """Start of the kernel expression (name, template arguments) before end."""
    i = end
    while i > 0:
        ch = text[i - 1]
        if ch == ">":
            depth = 0
            while True:  # skip the template argument list backwards
                i -= 1
                if text[i] == ">":
                    depth += 1
                elif text[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            continue
        if ch.isalnum() or ch == "_" or ch == ":":
            i -= 1
            continue
        break
    return i


def rewrite(text):
    out = []
    pos = 0
    for launch in re.finditer(r"<<<", text):
        if launch.start() < pos:
            continue
        start = kernel_start(text, launch.start())
        kernel = text[start:launch.start()].strip()
        config_end = text.index(">>>", launch.end())
        config = text[launch.end():config_end]
        args_open = config_end + 3
        while text[args_open].isspace():
            args_open += 1
        if text[args_open] != "(" or not kernel:
            raise ValueError("launch at offset %d is not kernel<<<...>>>(...)"
                             % launch.start())
        args_close = matching(text, args_open, "(", ")")
        args = text[args_open + 1:args_close - 1]
        if top_level_commas(config) != 3:
            raise ValueError("launch at offset %d: give all four launch "
                             "parameters (grid, block, shared bytes, stream)"
                             % launch.start())
        # Newlines stay where they were, so #line keeps lines in step.
        out.append(text[pos:start])
        out.append("::asrt_emu::launchKernel([](auto... a) { %s(a...); }, %s%s)"
                   % (kernel, config, ", " + args if args.strip() else ""))
        pos = args_close
    out.append(text[pos:])
    return re.sub(r"\b__noinline__\b", "__attribute__((noinline))",
                  "".join(out))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    try:
        result = rewrite(text)
    except ValueError as e:
        sys.exit("%s: %s" % (src, e))
    with open(dst, "w") as f:
        f.write('#line 1 "%s"\n' % src)
        f.write(result)


if __name__ == "__main__":
    main()
