#!/usr/bin/python3
"""Encodes and decodes with liblzma for the Go tests: one JSON request a
line on stdin ({"op": "encode"|"decode", "format": "xz"|"raw", "filters":
[...], "data": base64}), one JSON answer a line ({"data": base64} or
{"error": "..."})."""

import base64
import json
import lzma
import sys

for line in sys.stdin:
    req = json.loads(line)
    fmt = lzma.FORMAT_RAW if req["format"] == "raw" else lzma.FORMAT_XZ
    data = base64.b64decode(req["data"])
    try:
        if req["op"] == "encode":
            out = lzma.compress(data, format=fmt, filters=req["filters"])
        else:
            out = lzma.decompress(data, format=fmt, filters=req["filters"] if fmt == lzma.FORMAT_RAW else None)
        print(json.dumps({"data": base64.b64encode(out).decode()}), flush=True)
    except Exception as e:  # noqa: BLE001 - the answer names it
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}), flush=True)
