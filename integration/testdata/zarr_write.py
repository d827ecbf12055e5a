#!/usr/bin/python3
"""Writes regions of Zarr v2 arrays with zarr-python 2 (the write test's client).

Usage: /usr/bin/python3 zarr_write.py < config.json

The config names a mounted v2 view, a directory for plain copies and the
arrays to write:

    {"view": "MNT/v2", "copy": "DIR", "seed": 1,
     "arrays": [{"path": "a/b", "shard": [8, 8], "whole": true,
                 "write_empty_chunks": false}]}

Each array is first copied from the view into DIR (a plain DirectoryStore on
disk), then both are opened with mode r+ and receive the same writes: the whole
array (when "whole"), one aligned chunk, an unaligned box, a box of fill value
covering whole chunks, and a box across the shard boundary ("shard" is the
shard shape in elements). Reading the copy afterwards gives the expected
content of the array. Prints one JSON line per array: its path and the number
of writes, or the error.
"""
import json
import os
import shutil
import sys

import numpy as np
import zarr


def values(rng, z, shape):
    """Random values of the array's data type."""
    dt = z.dtype
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "O":
        out = np.empty(shape, dtype=object)
        flat = out.reshape(-1)
        for i in range(flat.size):
            flat[i] = "w%d-%d" % (rng.integers(0, 10**6), i)
        return out
    raise ValueError("no values for dtype %s" % dt)


def regions(shape, chunks, shard):
    """The boxes to write, as tuples of slices, and whether each holds the fill value."""
    if not shape:
        return []
    out = []
    # One whole chunk, away from the origin where the grid allows.
    out.append((tuple(slice(c, 2 * c) if s >= 2 * c else slice(0, c) for s, c in zip(shape, chunks)), False))
    # A box whose faces cut chunks.
    out.append((tuple(slice(s // 3, min(s, 2 * s // 3 + 1)) for s in shape), False))
    # Whole chunks of fill value at the origin: zarr-python stores or deletes them.
    out.append((tuple(slice(0, min(s, 2 * c)) for s, c in zip(shape, chunks)), True))
    # Across the first shard boundary, cutting chunks on both sides.
    out.append((tuple(slice(max(0, b - c // 2 - 1), min(s, b + c + 1)) for s, c, b in zip(shape, chunks, shard)), False))
    return out


def write(view, copy, spec, rng):
    path = spec["path"]
    shutil.copytree(os.path.join(view, path), os.path.join(copy, path))
    opts = {"write_empty_chunks": spec.get("write_empty_chunks", True)}
    targets = [
        zarr.open_array(zarr.DirectoryStore(view), path=path, mode="r+", **opts),
        zarr.open_array(zarr.DirectoryStore(copy), path=path, mode="r+", **opts),
    ]
    z = targets[0]
    n = 0
    if spec.get("whole") or not z.shape:
        data = values(rng, z, z.shape)
        for t in targets:
            t[...] = data
        n += 1
    for box, fill in regions(z.shape, z.chunks, spec["shard"]):
        shape = tuple(s.stop - s.start for s in box)
        if fill:
            data = np.full(shape, z.fill_value, dtype=z.dtype)
        else:
            data = values(rng, z, shape)
        for t in targets:
            t[box] = data
        n += 1
    return n


def main():
    cfg = json.load(sys.stdin)
    rng = np.random.default_rng(cfg.get("seed", 1))
    failed = False
    for spec in cfg["arrays"]:
        result = {"path": spec["path"]}
        try:
            result["writes"] = write(cfg["view"], cfg["copy"], spec, rng)
        except Exception as e:  # report every array, then fail
            result["error"] = "%s: %s" % (type(e).__name__, e)
            failed = True
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
