package azstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/azstore"
	"github.com/zarrfs/zarrfs/zarr/store/azstore/aztest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

func TestConformance(t *testing.T) {
	srv := aztest.Start(t)
	srv.Container(t, "conformance")
	storetest.Run(t, srv.Open(t, "conformance", "some/prefix", false))
}

func TestReadOnlyAndMissingContainer(t *testing.T) {
	ctx := context.Background()
	srv := aztest.Start(t)
	srv.Container(t, "ctr")
	ro := srv.Open(t, "ctr", "", true)
	if err := store.Write(ctx, ro, "k", []byte("v")); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Put on a read-only store: %v", err)
	}
	missing := srv.Open(t, "no-such-container", "", false)
	for what, err := range map[string]error{
		"Get":  func() error { _, err := store.ReadAll(ctx, missing, "zarr.json"); return err }(),
		"Stat": func() error { _, err := missing.Stat(ctx, "zarr.json"); return err }(),
	} {
		if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "ContainerNotFound") {
			t.Errorf("%s from a missing container: %v, want an error saying ContainerNotFound, not ErrNotFound", what, err)
		}
		t.Log(err)
	}
}

// TestFaults reads and writes through a proxy in front of Azurite that
// stalls, resets, cuts, lies and swaps blobs.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	srv := aztest.Start(t)
	srv.Container(t, "faults")
	p := faultproxy.Start(t, strings.TrimSuffix(srv.Endpoint, "/"+aztest.Account))
	// The account's key and the proxy as the endpoint, rather than the
	// connection string.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "")
	t.Setenv("AZURE_STORAGE_ACCOUNT", aztest.Account)
	t.Setenv("AZURE_STORAGE_KEY", aztest.Key)
	s, err := azstore.Open(ctx, "faults", "p", azstore.Options{Endpoint: p.URL + "/" + aztest.Account, Limits: storetest.FaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	storetest.RunFaults(t, storetest.FaultTarget{
		Store: s, Proxy: p, Limits: storetest.FaultLimits.WithDefaults(),
		Replace: func(t *testing.T, key string, b []byte) faultproxy.Object {
			etag, err := srv.Put(ctx, "faults", "p/"+key, b)
			if err != nil {
				t.Fatal(err)
			}
			return faultproxy.Object{Body: b, ETag: etag}
		},
	})
}

// TestIdentityHoldsNoSecret: the store's identity (its journals' name, the
// mount table's entry) names the container, the prefix and the account or
// endpoint, and none of the key, the SAS token or the connection string;
// neither do the errors of requests signed with them.
func TestIdentityHoldsNoSecret(t *testing.T) {
	ctx := context.Background()
	srv := aztest.Start(t)
	srv.Container(t, "ctr")
	const sas = "sv=2024-08-04&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig=TOPSECRETSIGNATURE%3D"
	p := faultproxy.Start(t, strings.TrimSuffix(srv.Endpoint, "/"+aztest.Account))
	endpoint := p.URL + "/" + aztest.Account
	for _, c := range []struct {
		name string
		env  map[string]string
		opts azstore.Options
		want string
	}{
		{"connection string", map[string]string{"AZURE_STORAGE_CONNECTION_STRING": aztest.ConnectionString(endpoint)}, azstore.Options{},
			"az://ctr/a/b?endpoint=" + endpoint},
		{"account key", map[string]string{"AZURE_STORAGE_ACCOUNT": aztest.Account, "AZURE_STORAGE_KEY": aztest.Key}, azstore.Options{Endpoint: endpoint + "/"},
			"az://ctr/a/b?endpoint=" + endpoint},
		{"account key, the endpoint spelled otherwise", map[string]string{"AZURE_STORAGE_ACCOUNT": aztest.Account, "AZURE_STORAGE_KEY": aztest.Key},
			azstore.Options{Endpoint: strings.Replace(endpoint, "http://", "HTTP://", 1) + "/"}, "az://ctr/a/b?endpoint=" + endpoint},
		{"SAS token in the environment", map[string]string{"AZURE_STORAGE_SAS_TOKEN": sas}, azstore.Options{Endpoint: endpoint},
			"az://ctr/a/b?endpoint=" + endpoint},
		{"SAS token given", nil, azstore.Options{Endpoint: endpoint, SAS: "?" + sas},
			"az://ctr/a/b?endpoint=" + endpoint},
		{"Azure's endpoint", map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": aztest.Key}, azstore.Options{},
			"az://ctr/a/b?account=acct"},
		{"Azure's endpoint, SAS", nil, azstore.Options{Account: "acct", SAS: sas},
			"az://ctr/a/b?account=acct"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
				t.Setenv(k, c.env[k])
			}
			c.opts.Limits = storetest.FaultLimits
			s, err := azstore.Open(ctx, "ctr", "/a/b/", c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.String() != c.want {
				t.Errorf("String() = %q, want %q", s.String(), c.want)
			}
			if !strings.Contains(c.want, p.URL) {
				return // Azure itself is not asked
			}
			// Requests signed with the secret, failing without an answer
			// (whose error quotes the URL) and with one.
			for _, f := range []faultproxy.Fault{{Reset: true}, {Status: 500}} {
				p.SetRule(func(*http.Request) faultproxy.Fault { return f })
				_, err := store.ReadAll(ctx, s, "zarr.json")
				p.SetRule(nil)
				msg := fmt.Sprint(err)
				if err == nil {
					t.Fatalf("a read meeting %+v succeeded", f)
				}
				for _, secret := range []string{"TOPSECRET", aztest.Key, aztest.Key[:20], "sig="} {
					if strings.Contains(msg, secret) {
						t.Errorf("a read meeting %+v: %q holds a secret (%q)", f, msg, secret)
					}
				}
				t.Log(msg)
			}
		})
	}
}

// TestServerSaysWhy: requests the emulator refuses fail with its code and
// message, naming what was asked, never an empty field or "not found".
func TestServerSaysWhy(t *testing.T) {
	ctx := context.Background()
	srv := aztest.Start(t)
	srv.Container(t, "why")
	wrongKey := strings.Repeat("A", len(aztest.Key)-2) + "=="
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"wrong key", map[string]string{"AZURE_STORAGE_ACCOUNT": aztest.Account, "AZURE_STORAGE_KEY": wrongKey}, []string{"HTTP 403", "AuthorizationFailure"}},
		{"wrong SAS", map[string]string{"AZURE_STORAGE_SAS_TOKEN": "sv=2024-08-04&sp=rl&se=2030-01-01T00:00:00Z&sr=c&sig=AAAA"}, []string{"HTTP 403", "AuthorizationFailure"}},
	} {
		for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN"} {
			t.Setenv(k, c.env[k])
		}
		s, err := azstore.Open(ctx, "why", "some/prefix", azstore.Options{Endpoint: srv.Endpoint, Limits: aztest.Limits})
		if err != nil {
			t.Fatal(err)
		}
		_, getErr := store.ReadAll(ctx, s, "zarr.json")
		var listErr error
		for _, err := range s.ListDir(ctx, "") {
			listErr = err
		}
		for what, err := range map[string]error{"GET zarr.json": getErr, "the listing of the root": listErr} {
			msg := fmt.Sprint(err)
			t.Logf("%s, %s: %s", c.name, what, msg)
			if err == nil || errors.Is(err, store.ErrNotFound) || strings.Contains(msg, ": :") || strings.HasPrefix(msg, ": ") {
				t.Errorf("%s, %s: %q; want the server's refusal, naming what was asked", c.name, what, msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s, %s: %q does not say %q", c.name, what, msg, w)
				}
			}
		}
		if !strings.Contains(fmt.Sprint(getErr), "zarr.json") || !strings.Contains(fmt.Sprint(listErr), "some/prefix/") {
			t.Errorf("%s: %v / %v; want the key and the prefix listed named", c.name, getErr, listErr)
		}
		s.Close()
	}
}

// TestSuffixReadIsTiedToOneGeneration: Azure has no suffix ranges, so the
// last bytes are read with a HEAD and a ranged GET (in the standard Range
// header); a blob replaced between the two is never mixed: the GET, tied
// to the HEAD's ETag, fails, and the read starts again on the new blob; a
// blob replaced before every GET fails the read with ErrPrecondition.
func TestSuffixReadIsTiedToOneGeneration(t *testing.T) {
	ctx := context.Background()
	srv := aztest.Start(t)
	srv.Container(t, "sfx")
	p := faultproxy.Start(t, strings.TrimSuffix(srv.Endpoint, "/"+aztest.Account))
	aztest.SetEnv(t, p.URL+"/"+aztest.Account)
	s, err := azstore.Open(ctx, "sfx", "", azstore.Options{Limits: storetest.FaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := srv.Put(ctx, "sfx", "v", bytes.Repeat([]byte("1"), 1000)); err != nil {
		t.Fatal(err)
	}
	// The rules run in the proxy's goroutines: the race detector does
	// not see that a request is sent before its answer comes.
	var mu sync.Mutex
	var sent []string
	p.SetRule(func(r *http.Request) faultproxy.Fault {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, r.Method+" "+r.Header.Get("Range"))
		return faultproxy.Fault{}
	})
	b, info, err := s.Get(ctx, "v", store.Last(100), store.Cond{})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || string(b) != strings.Repeat("1", 100) || info.Size != 1000 || fmt.Sprint(sent) != "[HEAD  GET bytes=900-999]" {
		t.Errorf("Last(100): %q, %+v, %v after %q; want the last 100 bytes after a HEAD and a GET with a standard Range header", b, info, err, sent)
	}
	for _, replacements := range []int{1, 100} {
		sent = nil
		var etag string
		n := 0
		mu.Unlock()
		p.SetRule(func(r *http.Request) faultproxy.Fault {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, r.Method)
			if r.Method == http.MethodGet && n < replacements {
				n++
				var err error
				if etag, err = srv.Put(ctx, "sfx", "v", bytes.Repeat([]byte{'a' + byte(n)}, 3000+n)); err != nil {
					t.Error(err)
				}
			}
			return faultproxy.Fault{}
		})
		b, info, err := s.Get(ctx, "v", store.Last(100), store.Cond{})
		p.SetRule(nil)
		mu.Lock()
		switch {
		case replacements == 1 && (err != nil || string(b) != strings.Repeat("b", 100) || string(info.Generation) != etag || info.Size != 3001):
			t.Errorf("the blob replaced between HEAD and GET once: %q, %+v, %v after %v; want the new blob's last bytes", b, info, err, sent)
		case replacements > 1 && !errors.Is(err, store.ErrPrecondition):
			t.Errorf("the blob replaced before every GET: %q, %v after %v; want ErrPrecondition", b, err, sent)
		}
		t.Logf("replaced before %d GETs: %v after %v", min(n, replacements), err, sent)
	}
}
