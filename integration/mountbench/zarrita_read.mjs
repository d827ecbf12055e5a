// Times zarrita.js reading one array whole over HTTP, for the zarrfs mount
// benchmark: the modern reader that fetches a sharded store itself (index
// by suffix range, inner chunks by range, all at once).
//
//   node zarrita_read.mjs URL ARRAY_PATH
//
// Prints one JSON line: the seconds the read took, the bytes read and the
// sum of the uint16 values (which must agree with the other readers).
import { FetchStore } from "@zarrita/storage";
import * as zarr from "zarrita";

const [url, path] = process.argv.slice(2);
const start = performance.now();
const store = new FetchStore(url, { useSuffixRequest: true });
const arr = await zarr.open(zarr.root(store).resolve(path), { kind: "array" });
const { data } = await zarr.get(arr);
const seconds = (performance.now() - start) / 1000;
let sum = 0;
for (let i = 0; i < data.length; i++) sum += data[i];
console.log(JSON.stringify({ seconds, nbytes: data.byteLength, checksum: sum }));
