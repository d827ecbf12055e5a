// Times zarrita.js reading one array, for the zarrfs mount benchmark: the
// modern reader that fetches a sharded store itself (index by suffix range,
// inner chunks by range, all at once).
//
//   node zarrita_read.mjs STORE ARRAY_PATH [CHUNKS_JSON]
//
// STORE is a URL (read over HTTP) or a directory (read as files, e.g.
// through a mount). Without CHUNKS_JSON the array is read whole; with it
// (a file holding a JSON list of chunk coordinates) those chunks are read
// one after another, as a random reader visits them.
//
// Prints one JSON line: the seconds the read took, the bytes read and the
// sum of the uint16 values (which must agree with the other readers).
import { readFileSync } from "node:fs";
import { FetchStore, FileSystemStore } from "@zarrita/storage";
import * as zarr from "zarrita";

const [where, path, chunksFile] = process.argv.slice(2);
const chunks = chunksFile ? JSON.parse(readFileSync(chunksFile, "utf8")) : null;
const start = performance.now();
const store = /^https?:/.test(where) ? new FetchStore(where, { useSuffixRequest: true }) : new FileSystemStore(where);
const arr = await zarr.open(zarr.root(store).resolve(path), { kind: "array" });
const parts = [];
if (chunks) {
  for (const coords of chunks) parts.push((await arr.getChunk(coords)).data);
} else {
  parts.push((await zarr.get(arr)).data);
}
const seconds = (performance.now() - start) / 1000;
let sum = 0, nbytes = 0;
for (const data of parts) {
  nbytes += data.byteLength;
  for (let i = 0; i < data.length; i++) sum += data[i];
}
console.log(JSON.stringify({ seconds, nbytes, checksum: sum }));
