#!/usr/bin/python3
"""Compare blosc decode speed: c-blosc (numcodecs) against our Go package.

    /usr/bin/python3 codec/blosc/testdata/bench_cblosc.py [--dir DIR] [--no-go]

1. Generates the benchmark datasets (same generators as gen_vectors.py and
   bench_test.go), compresses each with c-blosc for every codec (clevel 5,
   byte shuffle and bitshuffle, automatic block size), and writes the frames
   to DIR (default: a temporary directory).
2. Times c-blosc decoding each frame with 1 and 2 threads into a
   preallocated buffer (best of WINDOWS windows of REPS decodes).
3. Unless --no-go, runs BenchmarkDecodeCBlosc with BLOSC_BENCH_DIR=DIR, so Go
   decodes the very same files with GOMAXPROCS 1 and 2 (same windows), and
   prints MB/s (10^6 bytes/s of decoded output) side by side with the
   Go/c-blosc ratios.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from numcodecs import blosc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import gen_vectors  # noqa: E402  (shared input generators)

# Must match benchDatasets in bench_test.go.
DATASETS = {
    "u16vol": {"kind": "vol16", "ts": 2, "nbytes": 2 * 128 ** 3, "seed": 1, "shape": [128, 128, 128]},
    "f32walk": {"kind": "f32walk", "ts": 4, "nbytes": 4 << 20, "seed": 2, "amp": 3},
}
CNAMES = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"]
SHUFFLES = {"shuffle": 1, "bitshuffle": 2}


# Both sides report the best of several windows of REPS decodes, for wall
# time and for CPU time separately, so short bursts of other load on the
# machine do not decide the result.
REPS = 20
WINDOWS = 8


def time_decode(frame, nbytes, threads):
    """Best wall-clock MB/s and best MB/s per second of process CPU time."""
    blosc.set_nthreads(threads)
    dest = np.empty(nbytes, dtype=np.uint8)
    blosc.decompress(frame, dest)  # warm up
    best_wall = best_cpu = float("inf")
    for _ in range(WINDOWS):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(REPS):
            blosc.decompress(frame, dest)
        wall, cpu = (time.perf_counter() - t0) / REPS, (time.process_time() - c0) / REPS
        if threads == 1 and wall < cpu / 1.05:
            continue  # as in run_go: a clock glitch
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return nbytes / best_wall / 1e6, nbytes / best_cpu / 1e6


def run_go(d):
    env = dict(os.environ, BLOSC_BENCH_DIR=d)
    cmd = ["go", "test", "-run", "^$", "-bench", "^BenchmarkDecodeCBlosc$", "-benchtime", "%dx" % REPS,
           "-cpu", "1,2", "-count", str(WINDOWS), "."]
    out = subprocess.run(cmd, cwd=os.path.dirname(HERE), env=env, check=True,
                         capture_output=True, text=True).stdout
    res = {}  # (frame, GOMAXPROCS) -> [best MB/s, best cpuMB/s]
    for line in out.splitlines():
        m = re.match(r"BenchmarkDecodeCBlosc/(\S+?)(?:-(\d+))?\s+\d+\s+.*?([\d.]+) MB/s.*?([\d.]+) cpuMB/s", line)
        if m:
            procs, wall, cpu = int(m.group(2) or 1), float(m.group(3)), float(m.group(4))
            if procs == 1 and wall > cpu * 1.05:
                continue  # one thread cannot beat its CPU time: a clock glitch on a loaded VM
            r = res.setdefault((m.group(1), procs), [0.0, 0.0])
            r[0] = max(r[0], wall)
            r[1] = max(r[1], cpu)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", help="where to write the frames (default: a temporary directory)")
    ap.add_argument("--no-go", action="store_true", help="only time c-blosc")
    args = ap.parse_args()
    d = args.dir or tempfile.mkdtemp(prefix="blosc-bench-")
    os.makedirs(d, exist_ok=True)

    rows = []
    for dname, g in DATASETS.items():
        raw = gen_vectors.make_input(g)
        for cname in CNAMES:
            for sname, shuffle in SHUFFLES.items():
                blosc.set_nthreads(1)
                frame = gen_vectors.numcodecs_compress(raw, cname, 5, shuffle, g["ts"], 0)
                name = "%s-%s-%s" % (dname, cname, sname)
                with open(os.path.join(d, name + ".blosc"), "wb") as f:
                    f.write(frame)
                (c1, c1cpu), (c2, _) = time_decode(frame, len(raw), 1), time_decode(frame, len(raw), 2)
                rows.append((name, len(raw) / len(frame), c1, c2, c1cpu))

    go = {} if args.no_go else run_go(d)
    print("frames in %s (c-blosc %s via numcodecs; Go GOMAXPROCS=1/2)" % (
        d, gen_vectors.lib().blosc_get_version_string().decode()))
    print("MB/s = 10^6 decoded bytes per second: wall clock (best run), and per second of")
    print("process CPU time on one thread (cpu), which other load on the machine distorts less.")
    hdr = "%-28s %5s %8s %8s" % ("frame (4 MiB, clevel 5)", "ratio", "c 1T", "c 2T")
    if go:
        hdr += " %8s %8s %7s %7s" % ("Go 1T", "Go 2T", "Go/c 1T", "Go/c 2T")
    hdr += " %8s" % "c cpu"
    if go:
        hdr += " %8s %8s" % ("Go cpu", "Go/c cpu")
    print(hdr)
    for name, ratio, c1, c2, c1cpu in rows:
        line = "%-28s %5.1f %8.0f %8.0f" % (name, ratio, c1, c2)
        g1, g2 = go.get((name, 1), [0.0, 0.0]), go.get((name, 2), [0.0, 0.0])
        if go:
            line += " %8.0f %8.0f %7.2f %7.2f" % (g1[0], g2[0], g1[0] / c1, g2[0] / c2)
        line += " %8.0f" % c1cpu
        if go:
            line += " %8.0f %8.2f" % (g1[1], g1[1] / c1cpu)
        print(line)


if __name__ == "__main__":
    main()
