#!/usr/bin/python3
"""Write blosc1 test vectors made by c-blosc (via numcodecs and libblosc).

Run from anywhere with Debian's python3-numcodecs installed:

    /usr/bin/python3 codec/blosc/testdata/gen_vectors.py

It writes vectors.json (parameters, inputs, expected digests) and
vectors.bin.gz (the frames, concatenated) next to this file. Inputs are not
stored: they are recomputed from the generator parameters by make_input()
below and by its Go twin, genInput in gen_test.go. Both must stay in sync.

Most frames come from numcodecs.Blosc. Frames numcodecs cannot produce
(nbytes not a multiple of typesize, forced split modes) come from calling
libblosc.so.1, the library numcodecs links, through ctypes.
"""

import ctypes
import gzip
import hashlib
import json
import os
import sys

import numpy as np
import numcodecs
from numcodecs import blosc

HERE = os.path.dirname(os.path.abspath(__file__))
CNAMES = ["blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"]
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(seed, idx):
    """splitmix64 output number idx (0-based) for a seed, vectorised."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (idx.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def walk(seed, amp, n):
    """Random walk: v[i] = sum_{t<=i} (r_t mod (2amp+1)) - amp."""
    r = splitmix64(seed, np.arange(n, dtype=np.uint64))
    steps = (r % np.uint64(2 * amp + 1)).astype(np.int64) - amp
    return np.cumsum(steps, dtype=np.int64)


def elements(values, ts):
    """Little-endian bytes of uint64 values, byte j of an element being byte
    j%8 of its value (so typesizes above 8 repeat the value)."""
    u = values.astype(np.int64).view(np.uint64) if values.dtype == np.int64 else values.astype(np.uint64)
    out = np.empty((len(u), ts), dtype=np.uint8)
    for j in range(ts):
        out[:, j] = ((u >> np.uint64(8 * (j % 8))) & np.uint64(0xFF)).astype(np.uint8)
    return out.reshape(-1)


def make_input(g):
    """Bytes for generator parameters g (a dict; see gen_test.go)."""
    kind, ts = g["kind"], g.get("ts", 1)
    nbytes = g["nbytes"]
    n = -(-nbytes // ts)  # elements, the last one possibly cut
    if kind == "zeros":
        return bytes(nbytes)
    if kind == "ramp":
        with np.errstate(over="ignore"):
            v = np.arange(n, dtype=np.uint64) * np.uint64(g["step"])
        data = elements(v, ts)
    elif kind == "walk":
        data = elements(walk(g["seed"], g["amp"], n), ts)
    elif kind == "random":
        k = np.arange(-(-nbytes // 8), dtype=np.uint64)
        data = splitmix64(g["seed"], k).astype("<u8").view(np.uint8)
    elif kind == "f32walk":
        assert ts == 4
        data = (walk(g["seed"], g["amp"], n).astype(np.float32) * np.float32(0.25)).astype("<f4").view(np.uint8)
    elif kind == "vol16":
        assert ts == 2
        nx, ny, nz = g["shape"]
        z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
        x, y, z = (a.reshape(-1).astype(np.uint64) for a in (x, y, z))
        r = splitmix64(g["seed"], np.arange(nx * ny * nz, dtype=np.uint64))
        v = (((x * x + np.uint64(2) * y * y + np.uint64(3) * z * z) >> np.uint64(4)) + r % np.uint64(4)) & np.uint64(0xFFFF)
        data = v.astype("<u2").view(np.uint8)
    else:
        raise ValueError(kind)
    return data.tobytes()[:nbytes]


# --- c-blosc access -------------------------------------------------------

_lib = None


def lib():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL("libblosc.so.1")
        _lib.blosc_compress_ctx.restype = ctypes.c_int
        _lib.blosc_compress_ctx.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        _lib.blosc_get_version_string.restype = ctypes.c_char_p
    return _lib


SPLITMODES = {"always": 1, "never": 2, "auto": 3, "forward": 4}


def ctypes_compress(raw, cname, clevel, shuffle, ts, blocksize, splitmode="forward"):
    """blosc_compress_ctx with any typesize/nbytes, under a given split mode."""
    l = lib()
    l.blosc_set_splitmode(SPLITMODES[splitmode])
    try:
        src = ctypes.create_string_buffer(raw, len(raw))
        cap = len(raw) + 16
        dst = ctypes.create_string_buffer(cap)
        n = l.blosc_compress_ctx(clevel, shuffle, ts, len(raw), src, dst, cap, cname.encode(), blocksize, 1)
        if n <= 0:
            raise RuntimeError("blosc_compress_ctx failed: %d" % n)
        return dst.raw[:n]
    finally:
        l.blosc_set_splitmode(SPLITMODES["forward"])


def numcodecs_compress(raw, cname, clevel, shuffle, ts, blocksize):
    dtype = {1: "u1", 2: "u2", 4: "u4", 8: "u8"}.get(ts, "V%d" % ts)
    arr = np.frombuffer(raw, dtype=dtype)
    return bytes(numcodecs.Blosc(cname, clevel, shuffle, blocksize).encode(arr))


# --- the vector set -------------------------------------------------------

MAIN_N = {1: 2000, 2: 1200, 4: 752, 8: 256, 16: 136, 3: 1000, 12: 196, 33: 72}


def vector_specs():
    """Yield (input generator, options) for every vector."""
    # Every codec x shuffle x clevel on one typesize, three clevels on others.
    for ts, n in MAIN_N.items():
        g = {"kind": "walk", "ts": ts, "nbytes": n * ts, "seed": ts, "amp": 4}
        levels = range(10) if ts == 4 else (1, 5, 9)
        for cname in CNAMES:
            for shuffle in (0, 1, 2):
                for clevel in levels:
                    yield g, dict(cname=cname, clevel=clevel, shuffle=shuffle)
    # Several automatic blocks with a leftover one.
    g = {"kind": "walk", "ts": 8, "nbytes": 80000, "seed": 7, "amp": 1}
    for cname in CNAMES:
        for shuffle in (0, 1, 2):
            yield g, dict(cname=cname, clevel=1, shuffle=shuffle)
    g = {"kind": "f32walk", "ts": 4, "nbytes": 70000, "seed": 8, "amp": 1}
    for cname in CNAMES:
        yield g, dict(cname=cname, clevel=1, shuffle=1)
        yield g, dict(cname=cname, clevel=1, shuffle=2)
    # Explicit block sizes (splitting codecs enlarge them unless blocks hold
    # fewer than 128 elements).
    g = {"kind": "walk", "ts": 4, "nbytes": 12000, "seed": 9, "amp": 5}
    for cname in CNAMES:
        for shuffle in (0, 1, 2):
            yield g, dict(cname=cname, clevel=5, shuffle=shuffle, blocksize=256)
        yield g, dict(cname=cname, clevel=5, shuffle=1, blocksize=4096)
    g = {"kind": "walk", "ts": 33, "nbytes": 33 * 300, "seed": 10, "amp": 5}
    for cname in CNAMES:
        yield g, dict(cname=cname, clevel=5, shuffle=1, blocksize=1000)
        yield g, dict(cname=cname, clevel=5, shuffle=2, blocksize=1000)
    # Tiny inputs, including the < 128 byte stored frames.
    for nbytes in (0, 1, 7, 100, 127, 128, 129, 200):
        g = {"kind": "ramp", "ts": 1, "nbytes": nbytes, "step": 3}
        for cname in CNAMES:
            yield g, dict(cname=cname, clevel=5, shuffle=1)
    for nbytes in (8, 120, 136, 1024):
        g = {"kind": "walk", "ts": 8, "nbytes": nbytes, "seed": 11, "amp": 5}
        for cname in ("blosclz", "lz4", "zstd"):
            yield g, dict(cname=cname, clevel=9, shuffle=2)
    # Incompressible data (stored fallback) and partly incompressible data
    # (raw splits next to compressed ones).
    g = {"kind": "random", "ts": 4, "nbytes": 4096, "seed": 12}
    for cname in CNAMES:
        yield g, dict(cname=cname, clevel=5, shuffle=1)
    g = {"kind": "walk", "ts": 4, "nbytes": 8000, "seed": 13, "amp": 1 << 20}
    for cname in CNAMES:
        for shuffle in (0, 1, 2):
            yield g, dict(cname=cname, clevel=5, shuffle=shuffle)
    g = {"kind": "zeros", "ts": 8, "nbytes": 100000}
    for cname in CNAMES:
        yield g, dict(cname=cname, clevel=9, shuffle=2)
    # typesize > 255 is recorded as 1.
    g = {"kind": "walk", "ts": 300, "nbytes": 300 * 20, "seed": 14, "amp": 3}
    yield g, dict(cname="lz4", clevel=5, shuffle=1)
    # Through libblosc directly: nbytes not a multiple of typesize...
    for ts, nbytes in ((4, 1001), (8, 70003), (3, 50000), (16, 70001)):
        g = {"kind": "walk", "ts": ts, "nbytes": nbytes, "seed": 15 + ts, "amp": 2}
        for cname in CNAMES:
            for shuffle in (0, 1, 2):
                yield g, dict(cname=cname, clevel=4, shuffle=shuffle, via="ctypes")
    # ...and forced split modes: split zstd, unsplit blosclz/lz4/snappy.
    g = {"kind": "walk", "ts": 4, "nbytes": 20000, "seed": 20, "amp": 3}
    for cname in CNAMES:
        for mode in ("always", "never"):
            yield g, dict(cname=cname, clevel=5, shuffle=1, via="ctypes", splitmode=mode)
            yield g, dict(cname=cname, clevel=5, shuffle=2, via="ctypes", splitmode=mode)


def main():
    blosc.set_nthreads(1)
    frames = bytearray()
    inputs, vectors = {}, []
    cache = {}
    for g, o in vector_specs():
        key = json.dumps(g, sort_keys=True)
        if key not in cache:
            cache[key] = make_input(g)
            name = "in%d" % len(inputs)
            inputs[name] = dict(g, sha256=hashlib.sha256(cache[key]).hexdigest())
            cache[key + "#name"] = name
        raw, iname = cache[key], cache[key + "#name"]
        ts = g.get("ts", 1)
        bs = o.get("blocksize", 0)
        if o.get("via") == "ctypes":
            frame = ctypes_compress(raw, o["cname"], o["clevel"], o["shuffle"], ts, bs, o.get("splitmode", "forward"))
        else:
            frame = numcodecs_compress(raw, o["cname"], o["clevel"], o["shuffle"], ts, bs)
        # numcodecs reports blosc_decompress's 0 for an empty frame as an error.
        if raw and bytes(blosc.decompress(frame)) != raw:
            sys.exit("c-blosc does not round-trip %r %r" % (g, o))
        nbytes, cbytes, blocksize = blosc.cbuffer_sizes(frame)
        v = dict(o)
        v.update(input=iname, typesize=ts, blocksize_opt=bs, offset=len(frames), length=len(frame),
                 hdr_flags=frame[2], hdr_typesize=frame[3], hdr_blocksize=blocksize)
        vectors.append(v)
        frames += frame
    manifest = {
        "generator": "gen_vectors.py",
        "cblosc": lib().blosc_get_version_string().decode(),
        "numcodecs": numcodecs.__version__,
        "inputs": inputs,
        "vectors": vectors,
    }
    # One input or vector per line keeps the file small and diffs readable.
    def dumps(x):
        return json.dumps(x, sort_keys=True, separators=(",", ":"))
    lines = ["{", '"cblosc":%s,' % dumps(manifest["cblosc"]), '"numcodecs":%s,' % dumps(manifest["numcodecs"]),
             '"generator":"gen_vectors.py",', '"inputs":{']
    names = sorted(inputs, key=lambda k: int(k[2:]))
    lines += ['"%s":%s%s' % (k, dumps(inputs[k]), "," if i < len(names) - 1 else "") for i, k in enumerate(names)]
    lines += ["},", '"vectors":[']
    lines += [dumps(v) + ("," if i < len(vectors) - 1 else "") for i, v in enumerate(vectors)]
    lines += ["]", "}"]
    with open(os.path.join(HERE, "vectors.json"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with gzip.GzipFile(os.path.join(HERE, "vectors.bin.gz"), "wb", compresslevel=9, mtime=0) as f:
        f.write(frames)
    print("%d vectors, %d frame bytes, %d inputs" % (len(vectors), len(frames), len(inputs)))


if __name__ == "__main__":
    main()
