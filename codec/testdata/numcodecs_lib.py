"""Shared helpers for the numcodecs test scripts (run with Debian's
/usr/bin/python3: zarr 2.13, numcodecs 0.11).

A "case" is a small v2 array of one chunk: its .zarray fields (dtype,
shape, order, filters, compressor), the chunk as stored, and the decoded
content as zarrfs holds it (little-endian C-order bytes, or items).
"""

import base64
import json

import numpy as np
import zarr


def b64(b):
    return base64.b64encode(bytes(b)).decode()


def chunk_key(ndim):
    return ".".join(["0"] * ndim) if ndim else "0"


def zarray(dtype, shape, order, filters, compressor):
    return {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(shape) if shape else [],
        "dtype": dtype,
        "order": order,
        "filters": filters,
        "compressor": compressor,
        "fill_value": None,
    }


def decoded(arr, object_codec=None):
    """The decoded chunk as zarrfs holds it."""
    if arr.dtype == object:
        flat = list(np.asarray(arr).ravel(order="C"))
        if object_codec == "vlen-bytes":
            return {"items_b64": [b64(x) for x in flat]}
        if object_codec == "json2":
            return {"items": [json.dumps(x, separators=(",", ":"), ensure_ascii=False) for x in flat]}
        return {"items": [str(x) for x in flat]}
    le = arr.dtype.newbyteorder("<") if arr.dtype.byteorder in "<>=" else arr.dtype
    return {"data": b64(np.ascontiguousarray(arr.astype(le)).tobytes(order="C"))}


def decode_with_zarr(meta, chunk):
    """Reads one stored chunk as zarr-python 2.13 does."""
    store = {".zarray": json.dumps(meta).encode(), chunk_key(len(meta["shape"])): bytes(chunk)}
    z = zarr.open_array(store, mode="r")
    return z[...]
