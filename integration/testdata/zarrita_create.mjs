// Creates, with zarrita's zarr.create, a group and an unsharded array
// (uncompressed: zarrita encodes no compressor) through a mount's v3 view,
// and writes the array in two parts.
// Usage: node zarrita_create.mjs NODE_MODULES MNT/v3
// Prints one JSON line: {"sha256": digest of the little-endian C-order bytes
// written, "same": whether zarrita reads them back through the mount}.
import { createHash } from "node:crypto";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, view] = process.argv.slice(2);
const zarr = await import(pathToFileURL(path.join(modules, "zarrita", "dist", "src", "index.js")));
const { default: FileSystemStore } = await import(pathToFileURL(path.join(modules, "@zarrita", "storage", "dist", "src", "fs.js")));

const root = zarr.root(new FileSystemStore(view));
const grp = await zarr.create(root.resolve("zgrp"), { attributes: { made_by: "zarrita" } });
const arr = await zarr.create(grp.resolve("arr"), {
  shape: [9, 14], chunkShape: [4, 5], dtype: "int32", fillValue: -3,
  codecs: [{ name: "bytes", configuration: { endian: "little" } }], // zarrita encodes no compressor
  dimensionNames: ["y", "x"], attributes: { units: "m" },
});
const data = new Int32Array(9 * 14);
for (let i = 0; i < data.length; i++) data[i] = i * 7 - 50;
await zarr.set(arr, [zarr.slice(0, 5), null], { data: data.subarray(0, 5 * 14), shape: [5, 14], stride: [14, 1] });
await zarr.set(arr, [zarr.slice(5, 9), zarr.slice(0, 10)], {
  data: Int32Array.from({ length: 40 }, (_, k) => data[(5 + Math.floor(k / 10)) * 14 + (k % 10)]),
  shape: [4, 10], stride: [10, 1],
});
// Columns 10-13 of rows 5-8 were never written: they hold the fill value.
for (let r = 5; r < 9; r++) for (let c = 10; c < 14; c++) data[r * 14 + c] = -3;
const back = await zarr.get(await zarr.open(grp.resolve("arr"), { kind: "array" }));
let same = back.data.length === data.length;
for (let i = 0; same && i < data.length; i++) same = back.data[i] === data[i];
console.log(JSON.stringify({ sha256: createHash("sha256").update(Buffer.from(data.buffer)).digest("hex"), same }));
