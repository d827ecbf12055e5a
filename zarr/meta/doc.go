// Package meta reads and writes Zarr metadata documents: v3 zarr.json for
// arrays and groups, and v2 .zarray, .zgroup, .zattrs and consolidated
// .zmetadata.
//
// Parsing validates every field the formats define. Errors name the
// document and the field, and match ErrInvalid or ErrUnsupported with
// errors.Is.
//
// Parsed documents keep what they do not model (extension fields, unknown
// v2 keys, member order, numbers and short-hand names as written), so
// Marshal writes a parsed document back losslessly and re-encodes only the
// fields whose values changed. The zero value of each document type is a
// new document; Marshal writes it with the members in specification order.
package meta
