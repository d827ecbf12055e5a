package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBoundedBytes(t *testing.T) {
	c := New(100)
	for i := 0; i < 50; i++ {
		c.Add(fmt.Sprint(i), i, 10)
		if s := c.Stats(); s.Bytes > 100 {
			t.Fatalf("after %d adds the cache holds %d bytes", i+1, s.Bytes)
		}
	}
	s := c.Stats()
	if s.Entries != 10 || s.Bytes != 100 || s.Evictions != 40 {
		t.Fatalf("stats %+v, want 10 entries, 100 bytes, 40 evictions", s)
	}
	// The most recently used entries survive.
	if _, ok := c.Get("49"); !ok {
		t.Fatal("newest entry evicted")
	}
	if _, ok := c.Get("0"); ok {
		t.Fatal("oldest entry kept")
	}
	// Replacing an entry does not count it twice.
	c.Add("49", 0, 30)
	if s := c.Stats(); s.Bytes > 100 {
		t.Fatalf("replace: %d bytes", s.Bytes)
	}
	c.Add("huge", 0, 1000)
	if _, ok := c.Get("huge"); ok {
		t.Fatal("a value larger than the cache was kept")
	}
	c.Remove("49")
	if _, ok := c.Get("49"); ok {
		t.Fatal("Remove kept the entry")
	}
}

func TestGetOrLoadLoadsOnce(t *testing.T) {
	c := New(1 << 20)
	var loads atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.GetOrLoad(context.Background(), "k", func(context.Context) (any, int64, error) {
				loads.Add(1)
				<-release
				return "value", 5, nil
			})
			if err != nil || v != "value" {
				t.Errorf("GetOrLoad = %v, %v", v, err)
			}
		}()
	}
	close(release)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for concurrent misses of one key, want 1", n)
	}
	boom := errors.New("boom")
	if _, err := c.GetOrLoad(context.Background(), "bad", func(context.Context) (any, int64, error) { return nil, 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("load error not returned: %v", err)
	}
	if _, ok := c.Get("bad"); ok {
		t.Fatal("a failed load was cached")
	}
	if s := c.Stats(); s.LoadErrors != 1 {
		t.Fatalf("LoadErrors = %d", s.LoadErrors)
	}
}

// TestContains answers without counting a hit or a miss.
func TestContains(t *testing.T) {
	c := New(100)
	c.Add("a", 1, 10)
	if !c.Contains("a") || c.Contains("b") {
		t.Fatal(`Contains("a"), Contains("b"): want true, false`)
	}
	if s := c.Stats(); s.Hits != 0 || s.Misses != 0 {
		t.Fatalf("Contains counted: %+v", s)
	}
}
