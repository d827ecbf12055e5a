"""Times Python reading arrays, for the zarrfs mount benchmark.

    python3 zarr_read.py MODE ROUNDS ARRAY_DIR...

MODE zarr: zarr-python 2 reads each array whole.
MODE files, files-unbuffered: every chunk file of each array directory is
opened with open(path, "rb") and read whole; unbuffered passes buffering=0,
which skips the isatty() ioctl that a buffered open makes (and that the
kernel forwards to a FUSE daemon as a request of its own).

Each round reads every directory once, in the order given (interleaving the
copies being compared), and prints one JSON line per read: the directory,
the seconds the read took (interpreter start-up excluded), the bytes read
and a checksum of the data, which must agree between copies.
"""

import json
import os
import sys
import time

import zarr


def read_zarr(path):
    data = zarr.open_array(zarr.DirectoryStore(path), mode="r")[...]
    return data.nbytes, lambda: int(data.sum(dtype="uint64"))


def read_files(path, buffering):
    total = 0
    for name in sorted(os.listdir(path)):
        if not name.startswith("."):
            with open(os.path.join(path, name), "rb", buffering=buffering) as f:
                total += len(f.read())
    return total, lambda: total


def main():
    mode, rounds, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    read = {
        "zarr": read_zarr,
        "files": lambda path: read_files(path, -1),
        "files-unbuffered": lambda path: read_files(path, 0),
    }[mode]
    for _ in range(rounds):
        for path in paths:
            start = time.perf_counter()
            nbytes, checksum = read(path)
            seconds = time.perf_counter() - start
            print(json.dumps({"path": path, "seconds": seconds, "nbytes": nbytes, "checksum": checksum()}), flush=True)


if __name__ == "__main__":
    main()
