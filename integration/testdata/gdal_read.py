#!/usr/bin/python3
"""Reads Zarr v2 arrays with GDAL's multidimensional API, from a zarrfs
mount's v2/ view and from a copy zarr-python 2 writes of the same data (so
that its .zarray is zarr-python's own), and prints one JSON line per array:
{"path": P, "copy": DIGEST or error, "mount": DIGEST or error, "converted":
how GDAL's array differs from the Zarr array in type or shape, or ""}. A
digest is the sha256 of the array's little-endian C-order bytes.

Usage: /usr/bin/python3 gdal_read.py V2_ROOT COPY_DIR PATH...
"""
import hashlib
import json
import os
import sys

import numpy as np
import zarr
from osgeo import gdal

gdal.UseExceptions()


def digest(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big"):
        a = a.astype(a.dtype.newbyteorder("<"))
    return hashlib.sha256(a.tobytes()).hexdigest()


def gdal_read(path):
    """The array GDAL reads at path, or the error as a string."""
    try:
        ds = gdal.OpenEx('ZARR:"%s"' % path, gdal.OF_MULTIDIM_RASTER)
        root = ds.GetRootGroup()
        return root.OpenMDArray(root.GetMDArrayNames()[0]).ReadAsArray()
    except Exception as e:
        return "error: %s" % e


def zarr_python_copy(src, dst_path):
    """Writes the content of src to a new array at dst_path with
    zarr-python's own metadata, or returns the error as a string."""
    try:
        dst = zarr.open_array(dst_path, mode="w", shape=src.shape, chunks=src.chunks, dtype=src.dtype,
                              compressor=src.compressor, filters=src.filters, order=src.order,
                              fill_value=src.fill_value)
        dst[...] = src[...]
        return None
    except Exception as e:
        return "error: zarr-python cannot copy it: %s" % e


def main(v2root, copydir, paths):
    for p in paths:
        src = zarr.open_array(os.path.join(v2root, p), mode="r")
        dst_path = os.path.join(copydir, p.replace("/", "_"))
        copy = zarr_python_copy(src, dst_path) or gdal_read(dst_path)
        mount = gdal_read(os.path.join(v2root, p))
        converted = ""
        if not isinstance(copy, str) and (copy.dtype.newbyteorder("=") != src.dtype.newbyteorder("=") or copy.shape != src.shape):
            converted = "GDAL gives %s %s for %s %s" % (copy.dtype, copy.shape, src.dtype, src.shape)
        print(json.dumps({"path": p, "converted": converted,
                          "copy": copy if isinstance(copy, str) else digest(copy),
                          "mount": mount if isinstance(mount, str) else digest(mount)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
