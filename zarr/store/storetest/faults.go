package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

// FaultTarget is a remote store reached through a fault proxy.
type FaultTarget struct {
	Store store.Store
	Proxy *faultproxy.Proxy
	// Limits are the store's (defaults filled in): the cases finish
	// within them.
	Limits requests.Limits
	// Replace writes b at key behind the proxy, with a client of its own,
	// and returns it as the server now serves it.
	Replace func(t *testing.T, key string, b []byte) faultproxy.Object
}

// FaultLimits are limits that keep each fault case within seconds. The
// deadline leaves a whole attempt, with a loaded machine's delays, after
// a first one that ran to its body's limit (two timeouts and the transfer
// time): no retry starts with less than a timeout left.
var FaultLimits = requests.Limits{
	MaxAttempts: 4, MaxBackoff: 100 * time.Millisecond,
	Timeout: 500 * time.Millisecond, Deadline: 3 * time.Second, MinRate: 1 << 20,
	Logger: slog.New(slog.DiscardHandler),
}

// slack is what a case may take beyond its deadline on a loaded machine
// before it counts as a hang.
const slack = 10 * time.Second

// RunFaults checks that for every fault the proxy injects, a read of the
// store gives the right bytes (the fault retried) or a clean error naming
// the cause, within the store's deadline, and never bytes of another
// generation than the one asked for.
func RunFaults(t *testing.T, ft FaultTarget) {
	const key = "faults/shard"
	v1 := pattern(1, 256<<10)
	ft.Replace(t, key, v1)
	info, err := ft.Store.Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	gen := info.Generation
	if _, ok := ft.Store.(store.ScatterReader); !ok {
		t.Errorf("%T reads a range into one buffer only: a span of chunks would be copied into theirs", ft.Store)
	}
	gets := func(r *http.Request) bool { return r.Method == http.MethodGet }
	// A whole value shorter than announced cannot be told from a shorter
	// value; a range can, by its Content-Range.
	ranged := func(r *http.Request) bool { return gets(r) && r.Header.Get("Range") != "" }
	// Every read a mount makes: a range tied to the generation, an index
	// by suffix, a whole value, a stat.
	reads := []struct {
		name string
		read func(ctx context.Context) ([]byte, error)
		want []byte
	}{
		{"ReadAt", func(ctx context.Context) ([]byte, error) {
			p := make([]byte, 64<<10)
			return p, ft.Store.ReadAt(ctx, key, gen, p, 1000)
		}, v1[1000 : 1000+64<<10]},
		{"ReadScatter", func(ctx context.Context) ([]byte, error) {
			bufs := [][]byte{make([]byte, 10000), make([]byte, 30000), nil, make([]byte, 64<<10-40000)}
			err := store.ReadScatter(ctx, ft.Store, key, gen, bufs, 1000)
			return bytes.Join(bufs, nil), err
		}, v1[1000 : 1000+64<<10]},
		{"suffix Get", func(ctx context.Context) ([]byte, error) {
			b, _, err := ft.Store.Get(ctx, key, store.Last(4096), store.Cond{})
			return b, err
		}, v1[len(v1)-4096:]},
		{"whole Get", func(ctx context.Context) ([]byte, error) {
			return store.ReadAll(ctx, ft.Store, key)
		}, v1},
		{"Stat", func(ctx context.Context) ([]byte, error) {
			info, err := ft.Store.Stat(ctx, key)
			return []byte(fmt.Sprint(info.Size, info.Generation)), err
		}, []byte(fmt.Sprint(len(v1), gen))},
	}
	recovered := []struct {
		name string
		rule func() func(*http.Request) faultproxy.Fault
	}{
		{"no answer once", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(1, nil, faultproxy.Fault{Stall: true})
		}},
		{"reset once", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(1, nil, faultproxy.Fault{Reset: true})
		}},
		{"503 twice", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(2, nil, faultproxy.Fault{Status: http.StatusServiceUnavailable})
		}},
		{"body stalls after its headers once", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(1, gets, faultproxy.Fault{StallBody: true, After: 1000})
		}},
		{"body cut twice", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(2, gets, faultproxy.Fault{Cut: true, After: 1000})
		}},
		{"length announced longer once", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(1, gets, faultproxy.Fault{LieLength: 1000})
		}},
		{"length announced shorter once", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(1, ranged, faultproxy.Fault{LieLength: -1000})
		}},
		{"body trickles once", func() func(*http.Request) faultproxy.Fault {
			return faultproxy.Once(1, gets, faultproxy.Fault{Trickle: 50 * time.Millisecond})
		}},
	}
	for _, c := range recovered {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range reads {
				ft.Proxy.SetRule(c.rule())
				start := time.Now()
				b, err := r.read(context.Background())
				ft.Proxy.SetRule(nil)
				if err != nil || !bytes.Equal(b, r.want) {
					t.Errorf("%s: %d bytes, %v; want the %d right bytes after retrying", r.name, len(b), err, len(r.want))
				}
				if took := time.Since(start); took > ft.Limits.Deadline+slack {
					t.Errorf("%s took %s, the deadline is %s", r.name, took, ft.Limits.Deadline)
				}
			}
		})
	}

	failed := []struct {
		name  string
		fault faultproxy.Fault
		want  string // in the error
	}{
		{"never answers", faultproxy.Fault{Stall: true}, "no response within"},
		{"body always stalls", faultproxy.Fault{StallBody: true, After: 1000}, "no data within"},
		{"500 always", faultproxy.Fault{Status: http.StatusInternalServerError}, "HTTP 500"},
	}
	for _, c := range failed {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range reads {
				if r.name == "whole Get" || c.fault.StallBody && r.name == "Stat" {
					continue // a HEAD has no body; the whole Get fails as the others
				}
				ft.Proxy.SetRule(func(*http.Request) faultproxy.Fault { return c.fault })
				before := ft.Proxy.Requests()
				start := time.Now()
				_, err := r.read(context.Background())
				took := time.Since(start)
				ft.Proxy.SetRule(nil)
				sent := ft.Proxy.Requests() - before
				if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: %v; want an error saying %q", r.name, err, c.want)
				} else if !strings.Contains(err.Error(), strings.TrimPrefix(ft.Proxy.URL, "http://")) && c.fault.Status == 0 {
					t.Errorf("%s: %v; want the error to name the server %s", r.name, err, ft.Proxy.URL)
				}
				if took > ft.Limits.Deadline+slack {
					t.Errorf("%s failed after %s, the deadline is %s", r.name, took, ft.Limits.Deadline)
				}
				if sent < 2 || sent > ft.Limits.MaxAttempts {
					t.Errorf("%s: %d attempts, want 2 to %d", r.name, sent, ft.Limits.MaxAttempts)
				}
				t.Logf("%s: %v after %s", r.name, err, took.Round(time.Millisecond))
			}
		})
	}

	t.Run("412 is not retried", func(t *testing.T) {
		ft.Proxy.SetRule(func(*http.Request) faultproxy.Fault { return faultproxy.Fault{Status: http.StatusPreconditionFailed} })
		defer ft.Proxy.SetRule(nil)
		before := ft.Proxy.Requests()
		if err := ft.Store.ReadAt(context.Background(), key, gen, make([]byte, 10), 0); !errors.Is(err, store.ErrPrecondition) || ft.Proxy.Requests() != before+1 {
			t.Errorf("ReadAt answered 412: %v after %d requests, want ErrPrecondition after 1", err, ft.Proxy.Requests()-before)
		}
	})

	// The value is replaced between the read of its index and the read of
	// a range: a server honouring If-Match answers 412, one ignoring it
	// (or a cache in between) answers with the new value, which must be
	// refused as well.
	t.Run("value replaced, If-Match ignored", func(t *testing.T) {
		v2 := pattern(2, 200<<10)
		obj2 := ft.Replace(t, key, v2)
		defer ft.Replace(t, key, v1)
		info2, err := ft.Store.Stat(context.Background(), key)
		if err != nil || info2.Generation == gen {
			t.Fatalf("the replaced value: %+v, %v; want a new generation", info2, err)
		}
		for _, server := range []struct {
			name string
			rule func(*http.Request) faultproxy.Fault
		}{
			{"honouring If-Match", nil},
			{"ignoring If-Match", func(*http.Request) faultproxy.Fault { return faultproxy.Fault{Serve: &obj2} }},
		} {
			ft.Proxy.SetRule(server.rule)
			p := make([]byte, 4096)
			if err := ft.Store.ReadAt(context.Background(), key, gen, p, 1000); !errors.Is(err, store.ErrPrecondition) {
				t.Errorf("a server %s: ReadAt at the replaced generation gave %v (old bytes %v, new bytes %v); want ErrPrecondition",
					server.name, err, bytes.Equal(p, v1[1000:5096]), bytes.Equal(p, v2[1000:5096]))
			}
			bufs := [][]byte{make([]byte, 1000), make([]byte, 3096)}
			if err := store.ReadScatter(context.Background(), ft.Store, key, gen, bufs, 1000); !errors.Is(err, store.ErrPrecondition) {
				t.Errorf("a server %s: ReadScatter at the replaced generation gave %v; want ErrPrecondition", server.name, err)
			}
			if _, _, err := ft.Store.Get(context.Background(), key, store.Last(100), store.Cond{IfMatch: gen}); !errors.Is(err, store.ErrPrecondition) {
				t.Errorf("a server %s: Get if-match the replaced generation gave %v; want ErrPrecondition", server.name, err)
			}
			b, info, err := ft.Store.Get(context.Background(), key, store.Range(1000, 4096), store.Cond{IfMatch: info2.Generation})
			if err != nil || !bytes.Equal(b, v2[1000:5096]) || info.Size != int64(len(v2)) {
				t.Errorf("a server %s: Get at the new generation: %d bytes, %+v, %v", server.name, len(b), info, err)
			}
		}
		ft.Proxy.SetRule(nil)
	})

	if store.ReadOnly(ft.Store) {
		return
	}
	t.Run("writes", func(t *testing.T) {
		// An upload: S3's PUT, GCS's POST.
		puts := func(r *http.Request) bool { return r.Method == http.MethodPut || r.Method == http.MethodPost }
		for i, f := range []faultproxy.Fault{{Reset: true}, {Stall: true}, {Status: http.StatusServiceUnavailable}} {
			v := pattern(byte(10+i), 100<<10)
			ft.Proxy.SetRule(faultproxy.Once(1, puts, f))
			err := store.Write(context.Background(), ft.Store, "faults/written", v)
			ft.Proxy.SetRule(nil)
			got, rerr := store.ReadAll(context.Background(), ft.Store, "faults/written")
			if err != nil || rerr != nil || !bytes.Equal(got, v) {
				t.Errorf("a PUT meeting %+v once: %v; read back %d bytes (%v), want the %d written", f, err, len(got), rerr, len(v))
			}
		}
		ft.Proxy.SetRule(func(r *http.Request) faultproxy.Fault {
			if puts(r) {
				return faultproxy.Fault{Stall: true}
			}
			return faultproxy.Fault{}
		})
		defer ft.Proxy.SetRule(nil)
		start := time.Now()
		err := store.Write(context.Background(), ft.Store, "faults/written", []byte("never"))
		if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "no response within") || took > ft.Limits.Deadline+slack {
			t.Errorf("a PUT never answered: %v after %s; want a timeout within %s", err, took, ft.Limits.Deadline)
		}
	})
	t.Run("answers lost", func(t *testing.T) { lostAnswers(t, ft) })
}

// lostAnswers checks the writes whose first attempt the server carried
// out and whose answer was lost: the retry, conditional on the state the
// first attempt changed, is refused by the server, and the store must
// tell its own write from another writer's (requests.Client.Put).
func lostAnswers(t *testing.T, ft FaultTarget) {
	ctx := context.Background()
	puts := func(r *http.Request) bool { return r.Method == http.MethodPut || r.Method == http.MethodPost }
	deletes := faultproxy.Methods(http.MethodDelete)
	lost := faultproxy.Fault{DropAnswer: true}
	const key = "faults/lost"
	defer ft.Proxy.SetRule(nil)
	if err := store.Delete(ctx, ft.Store, key, store.Cond{}); err != nil {
		t.Fatal(err)
	}
	// written checks that the store holds want at key, at the
	// generation the write returned.
	written := func(what string, info store.Info, err error, want []byte) {
		t.Helper()
		got, now, rerr := ft.Store.Get(ctx, key, store.All, store.Cond{})
		if err != nil || rerr != nil || !bytes.Equal(got, want) || now.Generation != info.Generation || info.Size != int64(len(want)) {
			t.Errorf("%s, its answer lost: %+v, %v; the store holds %d bytes at %+v (%v), want the %d written at the generation returned",
				what, info, err, len(got), now, rerr, len(want))
		}
	}

	v1 := pattern(31, 70<<10)
	ft.Proxy.SetRule(faultproxy.Once(1, puts, lost))
	info, err := store.Put(ctx, ft.Store, key, [][]byte{v1[:1000], v1[1000:]}, store.Cond{IfNoneMatch: store.AnyGeneration})
	written("a create (If-None-Match: *)", info, err, v1)
	gen1 := info.Generation

	v2 := pattern(32, 50<<10)
	ft.Proxy.SetRule(faultproxy.Once(1, puts, lost))
	info, err = store.Put(ctx, ft.Store, key, [][]byte{v2}, store.Cond{IfMatch: info.Generation})
	written("an update (If-Match)", info, err, v2)

	// Every upload's first answer lost: each update's retry is refused
	// for its own write, which must end the update, not start another.
	ft.Proxy.SetRule(faultproxy.FirstTries(puts, lost))
	before := ft.Proxy.Requests()
	v3 := pattern(33, 60<<10)
	err = store.Update(ctx, ft.Store, key, func(cur store.Object) (store.Change, error) {
		return store.Change{Value: [][]byte{v3}}, nil
	})
	sent := ft.Proxy.Requests() - before
	ft.Proxy.SetRule(nil)
	info, _ = ft.Store.Stat(ctx, key)
	written("store.Update with every upload's first answer lost", info, err, v3)
	// A read, two attempts of the upload, the read settling it (Azure's
	// whole read may cost a HEAD more).
	if sent > 5 {
		t.Errorf("store.Update with every upload's first answer lost sent %d requests; want one round, at most 5", sent)
	}

	// Another writer's value is not taken for one's own: the first
	// attempt never reached the server.
	ft.Proxy.SetRule(faultproxy.Once(1, puts, faultproxy.Fault{Status: http.StatusServiceUnavailable}))
	_, err = store.Put(ctx, ft.Store, key, [][]byte{pattern(34, 60<<10)}, store.Cond{IfNoneMatch: store.AnyGeneration})
	if !errors.Is(err, store.ErrPrecondition) {
		t.Errorf("a create of a key another writer holds, retried after a 503: %v, want ErrPrecondition", err)
	}
	ft.Proxy.SetRule(faultproxy.Once(1, puts, faultproxy.Fault{Status: http.StatusServiceUnavailable}))
	_, err = store.Put(ctx, ft.Store, key, [][]byte{v2}, store.Cond{IfMatch: gen1})
	if !errors.Is(err, store.ErrPrecondition) {
		t.Errorf("an update at a generation the key is not at, retried after a 503: %v, want ErrPrecondition", err)
	}
	if got, _ := store.ReadAll(ctx, ft.Store, key); !bytes.Equal(got, v3) {
		t.Errorf("refused writes changed the value")
	}

	ft.Proxy.SetRule(faultproxy.Once(1, deletes, lost))
	err = store.Delete(ctx, ft.Store, key, store.Cond{IfMatch: info.Generation})
	ft.Proxy.SetRule(nil)
	if _, serr := ft.Store.Stat(ctx, key); err != nil || !errors.Is(serr, store.ErrNotFound) {
		t.Errorf("a conditional delete, its answer lost: %v; then Stat: %v, want the value gone", err, serr)
	}
}

// pattern is n bytes that differ with seed and offset.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed*31 + byte(i) ^ byte(i>>8)*7
	}
	return b
}
