#!/usr/bin/python3
"""Writes testdata/numcodecs_vectors.json: chunks that zarr-python 2.13 /
numcodecs 0.11 store, with the content zarr reads back from them.

    cd codec && /usr/bin/python3 testdata/gen_vectors.py

numcodecs 0.11 has no crc32c or fletcher32; their vectors are computed
here with crcmod's CRC-32C and HDF5's Fletcher-32 as numcodecs >= 0.12
defines it, stored as v3 chains.
"""

import json
import os
import sys

import crcmod.predefined
import numcodecs
import numpy as np
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numcodecs_lib import b64, chunk_key, decoded  # noqa: E402

rng = np.random.default_rng(20240521)


def smooth(shape, dtype, scale=1000):
    """Smooth data: compressible, like real images."""
    n = int(np.prod(shape))
    x = np.cumsum(rng.integers(-3, 4, size=n)) + scale
    return x.reshape(shape).astype(dtype)


cases = []


def case(name, arr, order="C", filters=None, compressor=None, dtype=None, object_codec=None):
    store = {}
    filters = list(filters or [])
    obj = numcodecs.get_codec(dict(filters.pop(0))) if object_codec else None
    z = zarr.create(
        store=store,
        shape=arr.shape,
        chunks=arr.shape if arr.shape else True,
        dtype=dtype or arr.dtype,
        order=order,
        filters=[numcodecs.get_codec(dict(f)) for f in filters] if filters else None,
        compressor=numcodecs.get_codec(dict(compressor)) if compressor else None,
        fill_value=None,
        object_codec=obj,
    )
    z[...] = arr
    meta = json.loads(store[".zarray"])
    chunk = store[chunk_key(arr.ndim)]
    back = z[...]
    entry = {
        "name": name,
        "zarray": {k: meta[k] for k in ("dtype", "shape", "order", "filters", "compressor")},
        "encoded": b64(chunk),
    }
    entry.update(decoded(back, object_codec))
    cases.append(entry)


# Compressors.
i2 = smooth((10, 17), "<i2")
f4 = smooth((33,), "<f4") / 7
f8 = smooth((4, 5, 6), "<f8") / 3
u1 = smooth((300,), "|u1", 100)
for level in (1, 9):
    case(f"zlib-{level}", i2, compressor={"id": "zlib", "level": level})
    case(f"gzip-{level}", f4, compressor={"id": "gzip", "level": level})
    case(f"bz2-{level}", f8, compressor={"id": "bz2", "level": level})
case("zstd-1", i2, compressor={"id": "zstd", "level": 1})
case("zstd-5-be", smooth((40,), ">f8"), compressor={"id": "zstd", "level": 5})
case("lz4", smooth((64,), "<i4"), compressor={"id": "lz4", "acceleration": 1})
case("lz4-acc5", u1, compressor={"id": "lz4", "acceleration": 5})
case("lzma-default", f8, compressor={"id": "lzma"})
case("lzma-alone", i2, compressor={"id": "lzma", "format": 2, "check": -1, "preset": 1, "filters": None})
case("lzma-crc32", u1, compressor={"id": "lzma", "format": 1, "check": 1, "preset": 2, "filters": None})
case("lzma-nocheck", u1, compressor={"id": "lzma", "format": 1, "check": 0, "preset": 0, "filters": None})
case("blosc-lz4-shuffle", i2, compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0})
case("blosc-zstd-bitshuffle", f8, compressor={"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0})
case("blosc-autoshuffle-u1", u1, compressor={"id": "blosc", "cname": "blosclz", "clevel": 9, "shuffle": -1, "blocksize": 0})
case("blosc-zlib-noshuffle", smooth((8, 8), "<u8"), compressor={"id": "blosc", "cname": "zlib", "clevel": 1, "shuffle": 0, "blocksize": 0})
case("none", i2)
case("scalar", np.array(7, dtype="<i4"))  # zarr 2.13 drops the compressor of 0-d arrays

# Orders and byte orders.
case("order-F-i2-zlib", smooth((3, 4, 5), "<i2"), order="F", compressor={"id": "zlib", "level": 1})
case("order-F-f4-be", smooth((6, 7), ">f4") / 4, order="F")
case("c8", (smooth((12,), "<f4") + 1j * smooth((12,), "<f4")).astype("<c8"), compressor={"id": "zlib", "level": 1})
case("c16-be", (smooth((5,), "<f8") - 2j).astype(">c16"))

# Filters.
case("delta-i2", i2, filters=[{"id": "delta", "dtype": "<i2"}], compressor={"id": "zlib", "level": 1})
case("delta-i4-as-i2", smooth((50,), "<i4"), filters=[{"id": "delta", "dtype": "<i4", "astype": "<i2"}])
case("delta-be", smooth((20,), ">i2"), filters=[{"id": "delta", "dtype": ">i2", "astype": ">i2"}])
case("delta-u1-wrap", np.arange(0, 250, 7, dtype="|u1")[::-1].copy(), filters=[{"id": "delta", "dtype": "|u1"}])
case("delta-f8", np.arange(20, dtype="<f8") * 0.5, filters=[{"id": "delta", "dtype": "<f8"}])
case(
    "fixedscaleoffset-f8-u1",
    np.linspace(1000, 1025, 60).astype("<f8"),
    filters=[{"id": "fixedscaleoffset", "offset": 1000, "scale": 10, "dtype": "<f8", "astype": "|u1"}],
    compressor={"id": "zlib", "level": 1},
)
case(
    "fixedscaleoffset-f4-i2",
    (np.linspace(-30, 30, 41) + 0.013).astype("<f4"),
    filters=[{"id": "fixedscaleoffset", "offset": 1.5, "scale": 100, "dtype": "<f4", "astype": "<i2"}],
)
case("astype-f8-f4", f8, filters=[{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}])
case("astype-i8-i2", smooth((30,), "<i8"), filters=[{"id": "astype", "encode_dtype": "<i2", "decode_dtype": "<i8"}])
case("quantize-f8-f4", f8, filters=[{"id": "quantize", "digits": 2, "dtype": "<f8", "astype": "<f4"}])
case("quantize-f4", f4, filters=[{"id": "quantize", "digits": 3, "dtype": "<f4"}])
case("bitround-f4", f4, filters=[{"id": "bitround", "keepbits": 5}])
case("bitround-f8", f8, filters=[{"id": "bitround", "keepbits": 12}])
case("shuffle-2", i2, filters=[{"id": "shuffle", "elementsize": 2}], compressor={"id": "zlib", "level": 1})
case("shuffle-8", f8, filters=[{"id": "shuffle", "elementsize": 8}])
case("shuffle-4-on-i2", smooth((6,), "<i2"), filters=[{"id": "shuffle", "elementsize": 4}])
case("delta-shuffle-zlib", i2, filters=[{"id": "delta", "dtype": "<i2"}, {"id": "shuffle", "elementsize": 2}], compressor={"id": "zlib", "level": 1})
for n in (1, 8, 13, 64):
    case(f"packbits-{n}", rng.integers(0, 2, size=n).astype(bool), filters=[{"id": "packbits"}])
case("packbits-2d", rng.integers(0, 2, size=(5, 3)).astype(bool), filters=[{"id": "packbits"}], compressor={"id": "zlib", "level": 1})
case("crc32", i2, filters=[{"id": "crc32"}])
case("adler32", f4, filters=[{"id": "adler32"}], compressor={"id": "zlib", "level": 1})

# Object arrays.
strings = np.array(["", "a", "hello", "世界", "🚀🎉", "Ñoño", "tab\tquote\"", "x" * 300], dtype=object)
case("vlen-utf8", strings, filters=[{"id": "vlen-utf8"}], compressor={"id": "zlib", "level": 1}, object_codec="vlen-utf8")
case("vlen-utf8-2d-F", strings.reshape(2, 4), order="F", filters=[{"id": "vlen-utf8"}], object_codec="vlen-utf8")
blobs = np.array([b"", b"\x00\x01\x02", b"abc", bytes(range(256))], dtype=object)
case("vlen-bytes", blobs, filters=[{"id": "vlen-bytes"}], object_codec="vlen-bytes")
values = [
    "s", "ü\u00e9\u2603", "😀", 'q"\\/\b\f\n\r\t\x01\x7f',
    0, -1, 2**70, -(2**64),
    1.0, -0.0, 0.1, 1e16, 1e15, 1.5e-05, 0.0001, 123456789.125, 5e-324, 1.7976931348623157e308,
    float("nan"), float("inf"), float("-inf"),
    True, False, None,
    [1, [2, "x"], {}], {"b": 1, "a": [None, 2.5], "é": "ß"}, [],
]
obj = np.empty(len(values), dtype=object)
obj[:] = values
case("json2", obj, filters=[{"id": "json2"}], object_codec="json2")
obj2 = np.empty((2, 3), dtype=object)
obj2[:] = [["a", 1, None], [2.5, {"k": "v"}, "é"]]
case("json2-2d", obj2, filters=[{"id": "json2"}], object_codec="json2")
case("json2-2d-F", obj2, order="F", filters=[{"id": "json2"}], compressor={"id": "zlib", "level": 1}, object_codec="json2")

# Checksums numcodecs 0.11 lacks, as v3 chains: bytes(little) -> codec.
crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def fletcher32(data):
    # HDF5's H5_checksum_fletcher32 as numcodecs >= 0.12 defines it.
    sum1 = sum2 = 0
    n = len(data) // 2
    p = 0
    while n:
        t = min(n, 360)
        n -= t
        for _ in range(t):
            sum1 += (data[p] << 8) | data[p + 1]
            sum2 += sum1
            p += 2
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if len(data) % 2:
        sum1 += data[p] << 8
        sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return (sum2 << 16) | sum1


v3cases = []
for name, arr in (("i2", i2), ("u1-odd", u1[:301 - 4]), ("f8", f8)):
    raw = np.ascontiguousarray(arr).tobytes()
    v3cases.append({
        "name": "crc32c-" + name,
        "data_type": str(arr.dtype.name),
        "shape": list(arr.shape),
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        "encoded": b64(raw + crc32c(raw).to_bytes(4, "little")),
        "data": b64(raw),
    })
    v3cases.append({
        "name": "fletcher32-" + name,
        "data_type": str(arr.dtype.name),
        "shape": list(arr.shape),
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "numcodecs.fletcher32"}],
        "encoded": b64(raw + fletcher32(raw).to_bytes(4, "little")),
        "data": b64(raw),
    })

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numcodecs_vectors.json")
with open(out, "w") as f:
    json.dump({
        "generator": "gen_vectors.py with zarr %s, numcodecs %s, numpy %s" % (zarr.__version__, numcodecs.__version__, np.__version__),
        "v2": cases,
        "v3": v3cases,
    }, f, indent=1)
    f.write("\n")
print("wrote", out, len(cases), "v2 cases,", len(v3cases), "v3 cases")
