#!/usr/bin/python3
"""Writes whole chunks of a 2-D Zarr v2 array with zarr-python 2 until it fails.

Usage: /usr/bin/python3 zarr_crash_writer.py ARRAY_DIR MANIFEST ROUND

Each write fills one chunk, picked at random, with its sequence number
(ROUND * 100000 + n) through zarr-python's `z[box] = value`, which stores
the chunk as a temporary file renamed onto the chunk's key. The manifest
gets "B <seq> <i> <j>" before the write and "D <seq>" once the assignment
has returned (acknowledged); each line is one append, so a killed process
leaves whole lines. On the first OSError (zarrfs killed under it), also when
zarr-python wraps it in a KeyError: "E <seq> <errno>" and exit status 3.
"""
import os
import random
import sys

import zarr


def main(array_dir, manifest, round_):
    z = zarr.open_array(array_dir, mode="r+")
    rng = random.Random(round_)
    fd = os.open(manifest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    ci, cj = z.chunks
    gi, gj = -(-z.shape[0] // ci), -(-z.shape[1] // cj)
    n = 0
    while True:
        n += 1
        seq = round_ * 100000 + n
        i, j = rng.randrange(gi), rng.randrange(gj)
        os.write(fd, f"B {seq} {i} {j}\n".encode())
        try:
            z[i * ci:(i + 1) * ci, j * cj:(j + 1) * cj] = seq
        except (OSError, KeyError) as e:
            # DirectoryStore turns some OSErrors (makedirs) into KeyError.
            cause = e if isinstance(e, OSError) else e.__context__
            if not isinstance(cause, OSError):
                raise
            os.write(fd, f"E {seq} {cause.errno}\n".encode())
            sys.exit(3)
        os.write(fd, f"D {seq}\n".encode())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
