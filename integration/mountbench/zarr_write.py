"""Times zarr-python 2 writing a whole array, for the zarrfs mount benchmark.

    python3 zarr_write.py ARRAY_DIR [SHAPE CHUNKS]

The array must exist (its .zarray), unless SHAPE and CHUNKS (comma-separated)
are given: then zarr-python creates it, uint16 with zstd level 3, and the time
includes the creation. Its content - smooth gradients plus 6
bits of noise, like the benchmark's read datasets, so compressors work about
as hard - is generated before the clock starts. Prints one JSON line: the
array, the seconds the write took (opening included) and a checksum of the
data written.
"""

import json
import sys
import time

import numcodecs
import numpy as np
import zarr


def synthetic(shape):
    data = np.empty(shape, dtype=np.uint16)
    y = np.arange(shape[1], dtype=np.int64)[:, None]
    x = np.arange(shape[2], dtype=np.int64)[None, :]
    for z in range(shape[0]):
        smooth = (3 * z + 5 * y + 7 * x) // 4
        noise = ((z * 1299709) ^ (y * 104729) ^ (x * 7919)) >> 3 & 63
        data[z] = 1 + smooth + noise
    return data


def main():
    path = sys.argv[1]
    if len(sys.argv) > 2:
        shape = tuple(int(n) for n in sys.argv[2].split(","))
        chunks = tuple(int(n) for n in sys.argv[3].split(","))
        data = synthetic(shape)
        start = time.perf_counter()
        z = zarr.open_array(zarr.DirectoryStore(path), mode="w-", shape=shape, chunks=chunks,
                            dtype="<u2", compressor=numcodecs.Zstd(level=3))
        z[...] = data
    else:
        shape = zarr.open_array(zarr.DirectoryStore(path), mode="r").shape
        data = synthetic(shape)
        start = time.perf_counter()
        zarr.open_array(zarr.DirectoryStore(path), mode="r+")[...] = data
    seconds = time.perf_counter() - start
    print(json.dumps({"path": path, "seconds": seconds, "nbytes": data.nbytes, "checksum": int(data.sum(dtype="uint64"))}), flush=True)


if __name__ == "__main__":
    main()
