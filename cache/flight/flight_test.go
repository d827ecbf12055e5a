package flight

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A caller that leaves gets its context's error at once; the load goes on
// for the caller still waiting, which gets its result.
func TestLeaverDoesNotCancelOthers(t *testing.T) {
	var g Group
	release := make(chan struct{})
	started := make(chan struct{})
	var loadCancelled atomic.Bool
	fn := func(ctx context.Context) (any, error) {
		close(started)
		select {
		case <-release:
			return "v", nil
		case <-ctx.Done():
			loadCancelled.Store(true)
			return nil, ctx.Err()
		}
	}
	leaver, leave := context.WithCancel(context.Background())
	leaverErr := make(chan error, 1)
	go func() {
		_, err := g.Do(leaver, "k", fn)
		leaverErr <- err
	}()
	<-started
	stayer := make(chan any, 1)
	go func() {
		v, err := g.Do(context.Background(), "k", func(context.Context) (any, error) {
			t.Error("a second load of a key under way")
			return nil, nil
		})
		if err != nil {
			t.Errorf("the caller that stayed: %v", err)
		}
		stayer <- v
	}()
	for waiters(&g, "k") < 2 {
		time.Sleep(time.Millisecond)
	}
	leave()
	if err := <-leaverErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that left got %v, want context.Canceled", err)
	}
	close(release)
	if v := <-stayer; v != "v" {
		t.Errorf("the caller that stayed got %v", v)
	}
	if loadCancelled.Load() {
		t.Error("the load was cancelled while a caller waited")
	}
}

// When every caller has left, the load's context is cancelled, and the
// next caller starts a load of its own.
func TestLastLeaverCancels(t *testing.T) {
	var g Group
	cancelled := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", func(ctx context.Context) (any, error) {
			<-ctx.Done()
			close(cancelled)
			return nil, ctx.Err()
		})
		errc <- err
	}()
	for waiters(&g, "k") < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the load was not cancelled when its only caller left")
	}
	v, err := g.Do(context.Background(), "k", func(context.Context) (any, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Errorf("a new caller after the cancelled load: %v, %v", v, err)
	}
}

func TestPanicIsAnError(t *testing.T) {
	var g Group
	_, err := g.Do(context.Background(), "k", func(context.Context) (any, error) { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Do of a panicking load = %v", err)
	}
}

func TestDoneContext(t *testing.T) {
	var g Group
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Do(ctx, "k", func(context.Context) (any, error) {
		t.Error("a load started for a caller already gone")
		return nil, nil
	}); !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v", err)
	}
}

func waiters(g *Group, key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.calls[key]; ok {
		return c.waiters
	}
	return 0
}

// A caller that cannot leave runs the load in its own goroutine; others
// still wait for it with their own contexts.
func TestUncancellableCallerRunsLoad(t *testing.T) {
	var g Group
	release := make(chan struct{})
	started := make(chan struct{})
	inline := make(chan any, 1)
	go func() {
		v, _ := g.Do(context.WithoutCancel(context.Background()), "k", func(context.Context) (any, error) {
			close(started)
			<-release
			return "v", nil
		})
		inline <- v
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", nil)
		left <- err
	}()
	for waiters(&g, "k") < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("a caller leaving a load run inline: %v", err)
	}
	close(release)
	if v := <-inline; v != "v" {
		t.Errorf("the caller that ran the load got %v", v)
	}
}
