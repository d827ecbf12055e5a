# Resizes and appends to one array through a mount's v2 view with
# zarr-python 2, and does the same to a plain v2 copy made first; then
# tries structural edits that must be refused. Reads a JSON config on
# stdin: {"view": MNT/v2, "copy": DIR, "array": PATH}; prints one JSON
# line with the final shape and the errors of the refused edits.
import json
import sys

import numpy as np
import zarr

cfg = json.load(sys.stdin)
src = zarr.open(cfg["view"] + "/" + cfg["array"], mode="r+")
copy = zarr.open(cfg["copy"], mode="w", shape=src.shape, chunks=src.chunks,
                 dtype=src.dtype, fill_value=src.fill_value)
copy[...] = src[...]
rng = np.random.default_rng(29)
grow = rng.integers(1, 60000, size=(13, 24), dtype=src.dtype)
rows = rng.integers(1, 60000, size=(7, 24), dtype=src.dtype)
cols = rng.integers(1, 60000, size=(40, 5), dtype=src.dtype)
for z in (src, copy):
    z.resize(33, 24)            # grow: metadata only
    z[20:33, :] = grow
    z.append(rows, axis=0)      # 40 rows
    z.append(cols, axis=1)      # 29 columns
    z.resize(12, 17)            # shrink: chunks outside go
    z[10:12, 14:17] = 7         # write into a partial edge chunk
refused = {}
meta = cfg["view"] + "/" + cfg["array"] + "/.zarray"
for field, value in (("dtype", "<i4"), ("chunks", [10, 10]), ("fill_value", 9)):
    doc = json.load(open(meta))
    doc[field] = value
    try:
        with open(meta, "w") as f:
            json.dump(doc, f)
        refused[field] = "accepted"
    except OSError as e:
        refused[field] = type(e).__name__
print(json.dumps({"shape": list(src.shape), "reread": list(zarr.open(cfg["view"] + "/" + cfg["array"], mode="r").shape),
                  "refused": refused}))
