package cache

import (
	"fmt"
	"strings"
)

// Key is the canonical name of a cached value: the memory cache, the disk
// cache and the cluster all name one value by the same Key, and it
// carries everything that changes the value, so that two values never
// share one (whichever node, mount or build of zarrfs asks).
type Key struct {
	// Kind is what the value is and the version of its layout and of what
	// it depends on ("block.1"): values of another version, kept by another
	// build of zarrfs on a peer or in a cache directory, are never used.
	Kind string
	// Store is the identity of the store (store.Store's String: scheme,
	// endpoint, bucket, prefix; never secrets).
	Store string
	// Object is the store key of the object the value derives from, and Gen
	// that object's generation; "" for a value that finds it (an index).
	Object string
	Gen    string
	// Names is the rest that changes the value, of its kind: its encoding
	// and the codecs it was decoded with, which part of the object it is.
	Names []string
}

// String is the key as the caches store it: its fields, NUL-separated
// (no field holds a NUL: store keys and generations cannot, codec chains
// are JSON).
func (k Key) String() string {
	return strings.Join(append([]string{k.Kind, k.Store, k.Object, k.Gen}, k.Names...), "\x00")
}

// ParseKey returns the key s names (Key.String), for a node that loads the
// value a peer asked for.
func ParseKey(s string) (Key, error) {
	f := strings.Split(s, "\x00")
	if len(f) < 4 || f[0] == "" {
		return Key{}, fmt.Errorf("not a cache key: %q", s)
	}
	return Key{Kind: f[0], Store: f[1], Object: f[2], Gen: f[3], Names: f[4:]}, nil
}
