package store

import "testing"

// TestEndpoint: the spellings of one URL are one endpoint; other hosts,
// ports, schemes and paths are not.
func TestEndpoint(t *testing.T) {
	for want, spellings := range map[string][]string{
		"http://127.0.0.1:39101":        {"http://127.0.0.1:39101", "http://127.0.0.1:39101/", "HTTP://127.0.0.1:39101//", "http://127.0.0.1:39101#x"},
		"http://localhost:39101":        {"http://LocalHost:39101/"},
		"https://s3.example.org":        {"https://S3.Example.ORG:443/", "https://s3.example.org"},
		"http://s3.example.org":         {"http://s3.example.org:80"},
		"http://s3.example.org:443":     {"http://s3.example.org:443/"},
		"http://[::1]:9000":             {"http://[::1]:9000/"},
		"http://[::1]":                  {"http://[::1]:80"},
		"http://127.0.0.1:10000/Acct":   {"http://127.0.0.1:10000/Acct/"},
		"http://u:***@127.0.0.1:1/path": {"http://u:secret@127.0.0.1:1/path/"},
		"not a url":                     {"not a url"},
	} {
		for _, s := range spellings {
			if got := Endpoint(s); got != want {
				t.Errorf("Endpoint(%q) = %q, want %q", s, got, want)
			}
		}
	}
}
