// Reads OME-Zarr the way an OME-Zarr 0.4 viewer does, for the integration
// tests: ome-zarr.js (the OME team's JavaScript reader) opens each image
// group, lists its levels, axes and scales and reads every level; ajv
// validates each group's attributes against the OME-Zarr 0.4 JSON schemas.
//
//   node omezarr.mjs ROOT GROUP...
//
// GROUP is an image, a labels group, a plate or a well, relative to ROOT (a
// Zarr v2 hierarchy: zarrfs's v2 view). It follows labels, plates and wells
// down to their images, and prints one JSON object on stdout:
//   {"groups": {path: {"kind": k, "schemas": [...], "errors": [...]}},
//    "images": {path: {"version", "zarr_version", "axes", "paths", "scales",
//                      "labels", "levels": [{"path", "shape", "dtype", "sha256"}]}}}
// where sha256 is that of the level's little-endian C-order content.
import { readFile, readdir } from "node:fs/promises";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { NgffImage } from "ome-zarr.js";

// ome-zarr.js logs to the console (an image without labels, for one):
// keep stdout for the report.
console.log = console.info = console.debug = console.error;

const here = path.dirname(fileURLToPath(import.meta.url));
const [root, ...groups] = process.argv.slice(2);

const ajv = new Ajv2020({ strict: false, allErrors: true });
const schemaDir = path.join(here, "schemas-0.4");
const schemas = {};
for (const f of (await readdir(schemaDir)).filter((f) => f.endsWith(".schema"))) {
  const s = JSON.parse(await readFile(path.join(schemaDir, f), "utf8"));
  ajv.addSchema(s);
  schemas[f.replace(/\.schema$/, "")] = s.$id;
}

const out = { groups: {}, images: {} };

async function attributes(group) {
  return JSON.parse(await readFile(path.join(root, group, ".zattrs"), "utf8"));
}

function validate(group, kind, attrs, names) {
  const errors = [];
  for (const name of names) {
    const check = ajv.getSchema(schemas[name]);
    if (!check(attrs)) {
      errors.push(`${name}: ${ajv.errorsText(check.errors)}`);
    }
  }
  out.groups[group] = { kind, schemas: names, errors };
}

// digest hashes the content in C order: zarrita returns an "F" order
// array with its own strides.
function digest(chunk) {
  const { shape, stride } = chunk;
  let data = chunk.data;
  const n = shape.reduce((a, b) => a * b, 1);
  const c = new data.constructor(n);
  const index = new Array(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    let at = 0;
    for (let d = 0; d < shape.length; d++) at += index[d] * stride[d];
    c[i] = data[at];
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  data = c;
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return createHash("sha256").update(bytes).digest("hex");
}

async function image(group) {
  const attrs = await attributes(group);
  const names = ["image", "strict_image"];
  if ("image-label" in attrs) names.push("label", "strict_label");
  validate(group, "image-label" in attrs ? "label image" : "image", attrs, names);
  const img = await NgffImage.load(new FileSystemStore(path.join(root, group)));
  const levels = [];
  for (let i = 0; i < img.paths.length; i++) {
    const arr = await img.openArray(i);
    levels.push({ path: img.paths[i], shape: arr.shape, dtype: arr.dtype, sha256: digest(await zarr.get(arr)) });
  }
  const labels = "image-label" in attrs ? [] : await img.getLabelsPaths();
  out.images[group] = {
    version: img.getVersion(),
    zarr_version: img.getZarrVersion(),
    axes: img.axes,
    paths: img.paths,
    scales: img.scales,
    labels,
    levels,
  };
  for (const l of labels) {
    await visit(path.posix.join(group, "labels", l));
  }
}

async function visit(group) {
  const attrs = await attributes(group);
  if ("plate" in attrs) {
    validate(group, "plate", attrs, ["plate", "strict_plate"]);
    for (const w of attrs.plate.wells) {
      await visit(path.posix.join(group, w.path));
    }
  } else if ("well" in attrs) {
    validate(group, "well", attrs, ["well", "strict_well"]);
    for (const f of attrs.well.images) {
      await visit(path.posix.join(group, f.path));
    }
  } else if ("multiscales" in attrs) {
    await image(group);
  } else if ("labels" in attrs) {
    out.groups[group] = { kind: "labels", schemas: [], errors: [] };
  } else {
    out.groups[group] = { kind: "none", schemas: [], errors: [`no OME-Zarr 0.4 metadata: ${JSON.stringify(attrs).slice(0, 200)}`] };
  }
}

for (const g of groups) {
  await visit(g);
}
process.stdout.write(JSON.stringify(out) + "\n");
