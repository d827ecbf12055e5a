package main

import (
	"flag"
	"strings"
	"testing"
)

// TestUnknownStoreScheme: a STORE URL of a scheme no kind of store reads
// is refused, naming every form zarrfs reads, without the URL's secrets.
func TestUnknownStoreScheme(t *testing.T) {
	code, _, stderr := runCLI(t, "info", "ftp://user:secret@host/store")
	want := `unsupported store URL scheme "ftp" (a path, file://, s3://, gs://, az://, abfs://, abfss://, http://, https://)`
	if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "secret") {
		t.Errorf("zarrfs info ftp://...: exit %d, %q; want exit 1 and %q", code, stderr, want)
	}
}

// TestStoreFlags: the flags of the kinds of store keep their names and
// defaults in every command that opens a store.
func TestStoreFlags(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	addStoreFlags(fs)
	for name, def := range map[string]string{
		"s3-endpoint": "", "s3-path-style": "false", "s3-anonymous": "false", "gcs-anonymous": "false",
		"az-endpoint": "", "az-anonymous": "false", "journal-dir": "",
		"remote-attempts": "8", "remote-timeout": "5s", "remote-deadline": "20s",
	} {
		if f := fs.Lookup(name); f == nil || f.DefValue != def || f.Usage == "" {
			t.Errorf("--%s: %+v; want a flag defaulting to %q", name, f, def)
		}
	}
}
