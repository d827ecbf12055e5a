#!/usr/bin/python3
"""Writes chunk files through a zarrfs mount at random and records each write.

Usage: /usr/bin/python3 chunk_writer.py CONFIG.json

The config lists the chunks to write (each by its file in one or more views),
the candidate contents per array and view (files holding valid inner chunks),
and how to write:

    {"manifest": "PATH", "seed": 1, "tag": "w1", "ops": 0, "pace": 0.005,
     "delete": 0.05, "fsync": 0.1, "modes": ["trunc", "rename"],
     "arrays": [{"contents": {"v3": ["FILE", ...], "v2": ["FILE", ...]},
                 "chunks": [{"id": "zstd/1,2", "shard": "zstd/c/0/0",
                             "v3": "PATH", "v2": "PATH"}]}]}

The writer goes from shard to shard, writing a burst of 1 to 16 chunks in
each, so that shards it left are published while it writes others; "pace"
is a pause in seconds between writes. Each write picks a chunk, a view, a
content (or an unlink, with probability "delete") and a mode: "trunc" (open
with O_TRUNC, write, close) or "rename" (write a temporary file beside the
chunk, close, rename it onto the chunk).
Before it starts, the manifest gets "B <seq> <chunk id> <sha256 of the
content, or - for an unlink>"; once close (or rename) has returned,
"D <seq>". Manifest lines are single appends, so a writer killed at any
moment leaves whole lines. On the first error the writer records
"E <seq> <errno> <call>" and exits with status 3. "ops" bounds the number of
writes (0: write until killed).
"""
import hashlib
import json
import os
import random
import sys
import time


def main(path):
    with open(path) as f:
        cfg = json.load(f)
    rng = random.Random(cfg["seed"])
    manifest = os.open(cfg["manifest"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(line):
        os.write(manifest, (line + "\n").encode())

    shards = {}
    for a in cfg["arrays"]:
        contents = {}
        for view, files in a["contents"].items():
            contents[view] = []
            for name in files:
                with open(name, "rb") as f:
                    data = f.read()
                # Every view's bytes of a content commit the same stored bytes,
                # named by the hash of the v3 (stored) form.
                contents[view].append(data)
        hashes = [hashlib.sha256(b).hexdigest() for b in contents["v3"]]
        for chunk in a["chunks"]:
            shards.setdefault(chunk["shard"], ([], contents, hashes))[0].append(chunk)
    shards = [shards[k] for k in sorted(shards)]

    tag, ops, pace = cfg["tag"], cfg.get("ops", 0), cfg.get("pace", 0)
    n, burst = 0, 0
    while ops == 0 or n < ops:
        n += 1
        seq = "%s-%d" % (tag, n)
        if burst == 0:
            chunks, contents, hashes = rng.choice(shards)
            burst = rng.randint(1, 16)
        burst -= 1
        if pace:
            time.sleep(rng.uniform(0, 2 * pace))
        chunk = rng.choice(chunks)
        view = rng.choice(sorted(contents))
        target = chunk[view]
        call = "-"
        try:
            if rng.random() < cfg.get("delete", 0):
                record("B %s %s -" % (seq, chunk["id"]))
                try:
                    call = "unlink"
                    os.unlink(target)
                except FileNotFoundError:
                    pass  # already empty: the outcome is the same
            else:
                k = rng.randrange(len(hashes))
                data = contents[view][k]
                record("B %s %s %s" % (seq, chunk["id"], hashes[k]))
                mode = rng.choice(cfg["modes"])
                name = target
                if mode == "rename":
                    name = os.path.join(os.path.dirname(target), ".%s.%s.partial" % (os.path.basename(target), seq))
                call = "open"
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    call = "write"
                    os.write(fd, data)
                    if rng.random() < cfg.get("fsync", 0):
                        call = "fsync"
                        os.fsync(fd)
                finally:
                    call = "close"
                    os.close(fd)
                if mode == "rename":
                    call = "rename"
                    os.rename(name, target)
            record("D %s" % seq)
        except OSError as e:
            record("E %s %d %s" % (seq, e.errno, call))
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
