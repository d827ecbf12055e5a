#!/usr/bin/python3
"""Decodes chunks the way zarr-python 2.13 reads them, for the Go tests.

stdin: one JSON object per line, {"zarray": {dtype, shape, order, filters,
compressor}, "chunk": base64}. stdout: one JSON object per line, the
decoded chunk as numcodecs_lib.decoded returns it, or {"error": "..."}.
"""

import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numcodecs_lib import decode_with_zarr, decoded, zarray  # noqa: E402

OBJECT_CODECS = ("vlen-utf8", "vlen-bytes", "json2")

for line in sys.stdin:
    req = json.loads(line)
    z = req["zarray"]
    try:
        meta = zarray(z["dtype"], z["shape"], z["order"], z["filters"], z["compressor"])
        arr = decode_with_zarr(meta, base64.b64decode(req["chunk"]))
        ids = [f["id"] for f in (z["filters"] or []) if f["id"] in OBJECT_CODECS]
        out = decoded(arr, ids[0] if ids else None)
    except Exception as e:  # reported to the Go test
        out = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(out), flush=True)
