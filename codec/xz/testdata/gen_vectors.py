#!/usr/bin/python3
"""Writes testdata/vectors.json: what liblzma (through Python's lzma module,
as numcodecs and GDAL use it) writes for every filter chain Python can ask
for, over two inputs: machine-code-like bytes holding the instructions each
BCJ filter converts, and smooth numbers that delta filters suit.

    cd codec/xz && /usr/bin/python3 testdata/gen_vectors.py
"""

import base64
import json
import lzma
import random
import shutil
import struct
import subprocess

rng = random.Random(20240611)


def code(n):
    """Random bytes with, every few bytes, an instruction of one of the
    processors the BCJ filters know."""
    b = bytearray(rng.getrandbits(8) for _ in range(n))
    for i in range(0, n - 16, 16):
        kind = rng.randrange(7)
        if kind == 0:  # x86 call/jmp, displacement high byte 00/FF
            b[i + rng.randrange(8)] = rng.choice([0xE8, 0xE9])
            b[i + 12] = rng.choice([0, 0xFF])
        elif kind == 1:  # ARM BL
            b[i + 3] = 0xEB
        elif kind == 2:  # Thumb BL pair
            b[i + 1] = 0xF0 | rng.randrange(8)
            b[i + 3] = 0xF8 | rng.randrange(8)
        elif kind == 3:  # PowerPC bl
            b[i] = 0x48 | rng.randrange(4)
            b[i + 3] = (b[i + 3] & ~3) | 1
        elif kind == 4:  # SPARC call
            if rng.randrange(2):
                b[i], b[i + 1] = 0x40, b[i + 1] & 0x3F
            else:
                b[i], b[i + 1] = 0x7F, b[i + 1] | 0xC0
        elif kind == 5:  # IA-64 bundle, template 0x10: a branch in slot 2
            slot = (5 << 37) | (rng.getrandbits(20) << 13) | (rng.getrandbits(1) << 36)
            bundle = 0x10 | (rng.getrandbits(82) << 5) | (slot << 87)
            b[i:i + 16] = bundle.to_bytes(16, "little")
    return bytes(b)


def smooth(n):
    x, out = 1000, []
    for _ in range(n // 4):
        x += rng.randrange(-3, 4)
        out.append(x)
    return struct.pack("<%di" % len(out), *out)


inputs = [code(2048), smooth(2048), b""]

F = lzma
cases = []


def norm(spec):
    """The filter as the Go test builds it: every option explicit."""
    out = {"id": spec["id"]}
    if spec["id"] in (F.FILTER_LZMA1, F.FILTER_LZMA2):
        level = spec.get("preset", 6)
        out["dict_size"] = spec.get("dict_size", [256 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20, 8 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20][level])
        out["lc"], out["lp"], out["pb"] = spec.get("lc", 3), spec.get("lp", 0), spec.get("pb", 2)
    elif spec["id"] == F.FILTER_DELTA:
        out["dist"] = spec.get("dist", 1)
    else:
        out["start_offset"] = spec.get("start_offset", 0)
    return out


def case(name, fmt, filters, inp=0, check=-1):
    data = inputs[inp]
    if fmt == "raw":
        enc = lzma.compress(data, format=F.FORMAT_RAW, filters=filters)
    else:
        enc = lzma.compress(data, format=F.FORMAT_XZ, check=check, filters=filters)
    assert lzma.decompress(enc, format=F.FORMAT_RAW if fmt == "raw" else F.FORMAT_XZ,
                           filters=filters if fmt == "raw" else None) == data
    cases.append({"name": name, "format": fmt, "filters": [norm(f) for f in filters], "input": inp,
                  "encoded": base64.b64encode(enc).decode()})


L2 = {"id": F.FILTER_LZMA2, "preset": 1}
bcj = [("x86", F.FILTER_X86), ("powerpc", F.FILTER_POWERPC), ("ia64", F.FILTER_IA64),
       ("arm", F.FILTER_ARM), ("armthumb", F.FILTER_ARMTHUMB), ("sparc", F.FILTER_SPARC)]

case("xz-lzma2", "xz", [{"id": F.FILTER_LZMA2, "preset": 6}])
case("xz-lzma2-empty", "xz", [L2], inp=2)
case("xz-delta1-gdal", "xz", [{"id": F.FILTER_DELTA, "dist": 1}, {"id": F.FILTER_LZMA2, "preset": 6}], inp=1)
case("xz-delta4-numcodecs-doc", "xz", [{"id": F.FILTER_DELTA, "dist": 4}, L2], inp=1)
case("xz-delta256", "xz", [{"id": F.FILTER_DELTA, "dist": 256}, L2], inp=1)
for name, fid in bcj:
    case("xz-" + name, "xz", [{"id": fid}, L2])
case("xz-x86-start-offset", "xz", [{"id": F.FILTER_X86, "start_offset": 0x1000}, L2])
case("xz-arm-start-offset", "xz", [{"id": F.FILTER_ARM, "start_offset": 0x400}, L2])
case("xz-delta-x86-arm", "xz", [{"id": F.FILTER_DELTA, "dist": 2}, {"id": F.FILTER_X86}, {"id": F.FILTER_ARM}, L2])
for check, cname in [(F.CHECK_NONE, "none"), (F.CHECK_CRC32, "crc32"), (F.CHECK_SHA256, "sha256")]:
    case("xz-check-" + cname, "xz", [{"id": F.FILTER_DELTA, "dist": 4}, L2], inp=1, check=check)
case("raw-lzma2", "raw", [L2])
case("raw-delta4-lzma2", "raw", [{"id": F.FILTER_DELTA, "dist": 4}, L2], inp=1)
case("raw-sparc-lzma2-small-dict", "raw", [{"id": F.FILTER_SPARC}, {"id": F.FILTER_LZMA2, "dict_size": 65536, "lc": 1, "lp": 3, "pb": 4}])
case("raw-ia64-lzma2", "raw", [{"id": F.FILTER_IA64}, L2])
case("raw-lzma1", "raw", [{"id": F.FILTER_LZMA1}])
case("raw-lzma1-empty", "raw", [{"id": F.FILTER_LZMA1}], inp=2)
case("raw-delta1-lzma1-lc0-lp2-pb0", "raw", [{"id": F.FILTER_DELTA}, {"id": F.FILTER_LZMA1, "lc": 0, "lp": 2, "pb": 0}], inp=1)
case("raw-armthumb-lzma1", "raw", [{"id": F.FILTER_ARMTHUMB}, {"id": F.FILTER_LZMA1, "preset": 0}])

# Two streams with stream padding between them, as xz concatenates files
# (Python's lzma stops at the padding; xz reads on).
two = lzma.compress(inputs[0], filters=[{"id": F.FILTER_X86}, L2]) + bytes(8) + lzma.compress(inputs[1])
if shutil.which("xz"):
    assert subprocess.run(["xz", "-dc"], input=two, capture_output=True, check=True).stdout == inputs[0] + inputs[1]
cases.append({"name": "xz-two-streams", "format": "xz", "input": -1, "want": base64.b64encode(inputs[0] + inputs[1]).decode(),
              "encoded": base64.b64encode(two).decode()})

# Several blocks, each with its sizes in the header, as xz --block-size writes them.
if shutil.which("xz"):
    many = subprocess.run(["xz", "--format=xz", "--delta=dist=4", "--lzma2=preset=1", "--block-size=700", "-c"],
                          input=inputs[1], capture_output=True, check=True).stdout
    assert lzma.decompress(many) == inputs[1]
    cases.append({"name": "xz-blocks", "format": "xz", "input": 1, "encoded": base64.b64encode(many).decode()})

json.dump({"inputs": [base64.b64encode(i).decode() for i in inputs], "cases": cases},
          open("testdata/vectors.json", "w"), indent=1)
print(len(cases), "cases")
