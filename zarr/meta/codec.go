package meta

import "encoding/json"

// Codec is a codec as v3 metadata names it: a name and its configuration.
// Package codec builds working codecs from it; parsing metadata needs
// none of them.
type Codec struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
}
