package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// ErrUndiscoverable: the store cannot list and its root group has no
// consolidated metadata, so the root's children cannot be found.
var ErrUndiscoverable = errors.New("the children of the root group cannot be discovered")

// Undiscoverable returns why the hierarchy shows only its root although
// the root is a group (ErrUndiscoverable, naming the ways out), or nil.
func (h *Hierarchy) Undiscoverable() error {
	if !h.hidden {
		return nil
	}
	return fmt.Errorf("%w: %s cannot list its keys (a web server) and its root group has no consolidated metadata; "+
		"use an array's URL instead (%s/PATH/TO/ARRAY), or add consolidated metadata to the store "+
		"(zarrfs consolidate on the directory or bucket the server publishes)", ErrUndiscoverable, h.Store, h.Store)
}

// knownKeys stands in for listings on a store that cannot list (a web
// server): the metadata keys that consolidated metadata names, or the
// metadata documents found at the root.
type knownKeys map[string]bool

// discoverKeys finds the metadata keys of a store that cannot list: from
// the root zarr.json's consolidated_metadata (v3), from .zmetadata (v2),
// or else (consolidated false) by asking for each metadata document at
// the root, which finds the array or group the store's URL points at.
func discoverKeys(ctx context.Context, s store.Store) (keys knownKeys, consolidated bool, err error) {
	keys = knownKeys{}
	if b, err := ReadDocument(ctx, s, ZarrJSON); err == nil {
		keys[ZarrJSON] = true
		var doc struct {
			Consolidated *struct {
				Metadata map[string]json.RawMessage `json:"metadata"`
			} `json:"consolidated_metadata"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, false, fmt.Errorf("%s: %w", ZarrJSON, err)
		}
		if doc.Consolidated != nil {
			for p := range doc.Consolidated.Metadata {
				keys[store.Join(p, ZarrJSON)] = true
			}
		}
		return keys, doc.Consolidated != nil, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	if b, err := ReadDocument(ctx, s, ZMetadata); err == nil {
		c, err := meta.ParseConsolidated(b)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", ZMetadata, err)
		}
		for _, e := range c.Entries {
			if store.ValidateKey(e.Key) == nil {
				keys[e.Key] = true
			}
		}
		return keys, true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	for _, k := range []string{ZArray, ZGroup, ZAttrs} {
		if _, err := s.Stat(ctx, k); err == nil {
			keys[k] = true
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
	}
	return keys, false, nil
}

// listDir yields the children of prefix among the known keys, sorted.
func (k knownKeys) listDir(_ context.Context, prefix string) iter.Seq2[store.Entry, error] {
	return func(yield func(store.Entry, error) bool) {
		if prefix != "" {
			prefix = strings.TrimSuffix(prefix, "/") + "/"
		}
		children := map[string]bool{} // name -> is a directory
		for key := range k {
			rest, ok := strings.CutPrefix(key, prefix)
			if !ok {
				continue
			}
			name, _, dir := strings.Cut(rest, "/")
			children[name] = children[name] || dir
		}
		for _, name := range slices.Sorted(maps.Keys(children)) {
			if !yield(store.Entry{Name: name, Dir: children[name]}, nil) {
				return
			}
		}
	}
}
