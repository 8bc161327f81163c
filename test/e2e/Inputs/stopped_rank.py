"""Runs a job in which one rank is stopped and checks that the job ends.

Usage: stopped_rank.py --within SECONDS --log FILE -- COMMAND...

The command (mpirun and a training binary with --stop-rank-at) must fail
(every other rank ends the job at its collective timeout) and must end
within SECONDS of wall time: the timeout plus the margin the test allows
for starting, the steps before the stop and the abort. Its output, stdout
and stderr together, goes to FILE with a last line 'elapsed: S s', for
FileCheck. A job still running after 120 s is killed and fails the test:
it hangs, which is what the test is there to catch.
"""
import argparse
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--within", type=float, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=120)
        output, status = run.stdout, run.returncode
    except subprocess.TimeoutExpired as e:
        output, status = e.stdout or b"", None
    elapsed = time.monotonic() - start
    with open(args.log, "wb") as log:
        log.write(output)
        log.write(("elapsed: %.2f s\n" % elapsed).encode())
    if status is None:
        sys.exit("the job was still running after 120 s: it hangs")
    if status == 0:
        sys.exit("the job succeeded; a stopped rank should have ended it")
    if elapsed > args.within:
        sys.exit("the job took %.2f s, more than the %g s allowed"
                 % (elapsed, args.within))
    print("elapsed: %.2f s" % elapsed)


if __name__ == "__main__":
    main()
