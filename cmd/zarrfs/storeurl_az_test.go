package main

import (
	"context"
	"flag"
	"strings"
	"testing"
)

// TestParseAzureURLs: the forms users write an Azure container in become
// az:// stores (only https:// on Azure's blob host among web URLs), whose
// identity names the account and holds no SAS token; a public container's
// https:// URL without credentials is read anonymously and read-only.
func TestParseAzureURLs(t *testing.T) {
	for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", "envacct")
	sf := addStoreFlags(flag.NewFlagSet("test", flag.ContinueOnError))
	for _, c := range []struct {
		arg, identity string
		writable      bool
	}{
		{"az://ctr/a/b", "az://ctr/a/b?account=envacct", true},
		{"az://ctr@acct.dfs.core.windows.net/a", "az://ctr/a?account=acct", true},
		{"abfs://ctr@acct.dfs.core.windows.net/a/b/", "az://ctr/a/b?account=acct", true},
		{"abfss://ctr@Acct.blob.core.windows.net/", "az://ctr/?account=acct", true},
		{"https://acct.blob.core.windows.net/ctr/a/b", "az://ctr/a/b?account=acct", false},
		{"https://acct.blob.core.windows.net/ctr/a?sv=2024-08-04&sp=rl&sig=SECRETSIG", "az://ctr/a?account=acct", true},
	} {
		l, err := sf.parse(c.arg)
		if err != nil || l.Kind != "az" {
			t.Errorf("parse(%q) = %+v, %v; want an az:// store", c.arg, l, err)
			continue
		}
		if l.Writable != c.writable {
			t.Errorf("%s: writable %v, want %v", c.arg, l.Writable, c.writable)
		}
		s, err := sf.open(context.Background(), l, false)
		if err != nil {
			t.Errorf("open %s: %v", c.arg, err)
			continue
		}
		if s.String() != c.identity {
			t.Errorf("%s: identity %q, want %q", c.arg, s.String(), c.identity)
		}
		s.Close()
	}
	for _, arg := range []string{"https://example.org/ctr/a", "http://acct.blob.core.windows.net/ctr/a", "https://acct.blob.core.windows.net.evil.org/ctr"} {
		if l, err := sf.parse(arg); err != nil || l.Kind != "http" {
			t.Errorf("parse(%q) = %+v, %v; want a web server", arg, l, err)
		}
	}
	for _, arg := range []string{"az:///prefix", "abfs://acct.dfs.core.windows.net/a", "abfs://ctr@example.org/a", "https://acct.blob.core.windows.net/"} {
		if l, err := sf.parse(arg); err == nil {
			t.Errorf("parse(%q) = %+v; want an error", arg, l)
		} else if strings.Contains(err.Error(), "sig=") {
			t.Errorf("parse(%q): %v", arg, err)
		}
	}
}

// TestAzNoCredentials: an az:// store with an account and no credentials
// anywhere fails at once, saying which credentials zarrfs looks for.
func TestAzNoCredentials(t *testing.T) {
	for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
		"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_USERNAME"} {
		t.Setenv(k, "")
	}
	t.Setenv("AZURE_STORAGE_ACCOUNT", "nosuchaccount")
	t.Setenv("PATH", t.TempDir()) // no az or azd to ask
	code, _, stderr := runCLI(t, "info", "--remote-deadline", "5s", "az://ctr/p")
	t.Logf("exit %d: %s", code, stderr)
	if code != 1 || !strings.Contains(stderr, "no credentials found") || !strings.Contains(stderr, "AZURE_STORAGE_KEY") {
		t.Errorf("zarrfs info az://ctr/p without credentials: exit %d, %q; want exit 1 naming the credentials looked for", code, stderr)
	}
}
