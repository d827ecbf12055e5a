package cache

import (
	"slices"
	"testing"
)

// TestKeys: a key reads back as the fields it was built from, and keys
// that differ in any field (the rest of a value's names included) differ.
func TestKeys(t *testing.T) {
	k := Key{Kind: "block.1", Store: "s3://b/p", Object: "a/c/0", Gen: `"etag"`, Names: []string{"8", "0"}}
	got, err := ParseKey(k.String())
	if err != nil || got.Kind != k.Kind || got.Store != k.Store || got.Object != k.Object || got.Gen != k.Gen || !slices.Equal(got.Names, k.Names) {
		t.Errorf("ParseKey(%q) = %+v, %v; want %+v", k, got, err, k)
	}
	seen := map[string]Key{k.String(): k}
	for _, o := range []Key{
		{Kind: "block.2", Store: k.Store, Object: k.Object, Gen: k.Gen, Names: k.Names},
		{Kind: k.Kind, Store: "s3://b/q", Object: k.Object, Gen: k.Gen, Names: k.Names},
		{Kind: k.Kind, Store: k.Store, Object: "a/c/1", Gen: k.Gen, Names: k.Names},
		{Kind: k.Kind, Store: k.Store, Object: k.Object, Gen: `"other"`, Names: k.Names},
		{Kind: k.Kind, Store: k.Store, Object: k.Object, Gen: k.Gen, Names: []string{"8", "1"}},
		{Kind: k.Kind, Store: k.Store, Object: k.Object, Gen: k.Gen, Names: []string{"8"}},
		{Kind: k.Kind, Store: k.Store, Object: k.Object, Gen: k.Gen, Names: []string{"8", "0", ""}},
	} {
		if p, dup := seen[o.String()]; dup {
			t.Errorf("%+v and %+v share the key %q", o, p, o)
		}
		seen[o.String()] = o
	}
	for _, s := range []string{"", "block.1", "block.1\x00s\x00k", "\x00s\x00k\x00g"} {
		if k, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) = %+v: want an error", s, k)
		}
	}
}
