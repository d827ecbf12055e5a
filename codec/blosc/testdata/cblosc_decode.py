#!/usr/bin/python3
"""Decode blosc frames with c-blosc (numcodecs) for the Go interop test.

Usage: cblosc_decode.py DIR
For every DIR/*.blosc prints "NAME SHA256" of the decoded bytes, or
"NAME ERROR message" if c-blosc rejects the frame.
"""

import hashlib
import os
import sys

from numcodecs import blosc


def main():
    d = sys.argv[1]
    blosc.set_nthreads(1)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".blosc"):
            continue
        with open(os.path.join(d, name), "rb") as f:
            frame = f.read()
        try:
            nbytes, cbytes, _ = blosc.cbuffer_sizes(frame)
            if cbytes != len(frame):
                raise ValueError("cbytes %d != frame length %d" % (cbytes, len(frame)))
            # numcodecs reports blosc_decompress's 0 for an empty frame as an error.
            out = bytes(blosc.decompress(frame)) if nbytes else b""
            if len(out) != nbytes:
                raise ValueError("decoded %d bytes, header says %d" % (len(out), nbytes))
            print(name, hashlib.sha256(out).hexdigest())
        except Exception as e:  # report and go on with the next frame
            print(name, "ERROR", str(e).replace("\n", " "))


if __name__ == "__main__":
    main()
