package meta

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Codec is a codec as v3 metadata names it: a name and its configuration.
// Package codec builds working codecs from it; parsing metadata needs
// none of them.
type Codec struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
}

// String describes the codec for people: name(key=value, ...), keys
// sorted; a sharding codec by its name alone, as its configuration nests
// whole chains.
func (c Codec) String() string {
	var cfg map[string]json.RawMessage
	if json.Unmarshal(c.Configuration, &cfg) != nil || len(cfg) == 0 || c.Name == "sharding_indexed" {
		return c.Name
	}
	keys := slices.Sorted(maps.Keys(cfg))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strings.Trim(string(cfg[k]), `"`)
	}
	return c.Name + "(" + strings.Join(parts, ", ") + ")"
}

// ChainString describes a codec chain for people, codec -> codec.
func ChainString(chain []Codec) string {
	parts := make([]string, len(chain))
	for i, c := range chain {
		parts[i] = c.String()
	}
	return strings.Join(parts, " -> ")
}
