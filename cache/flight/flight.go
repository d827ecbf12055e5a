// Package flight runs loads that several callers wait for once, as
// singleflight does, with each caller's wait bounded by its own context:
// a caller whose request is interrupted leaves at once, and the load is
// cancelled only when every caller has left. A reader giving up therefore
// never fails the others waiting for the same fetch, and a fetch nobody
// waits for any more stops.
package flight

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// Group is a set of loads by key. The zero Group is ready to use.
type Group struct {
	mu    sync.Mutex
	calls map[string]*call
}

type call struct {
	done    chan struct{}
	val     any
	err     error
	waiters int
	cancel  context.CancelFunc
}

// Do returns the result of fn for key, running fn unless a load of key is
// under way, in which case it waits for that one. fn runs in a goroutine
// of its own with a context that carries ctx's values, not its
// cancellation: it is cancelled when every caller waiting for it has
// left. Do returns ctx's error as soon as ctx is done.
//
// A caller whose ctx can never be done (no Done channel, such as
// context.WithoutCancel's) runs fn itself, in its own goroutine: it will
// not leave, and brief work (a local transcode) then costs no handoff to
// another goroutine, which a caller locked to its OS thread pays twice.
func (g *Group) Do(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*call{}
	}
	c, ok := g.calls[key]
	if !ok {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &call{done: make(chan struct{}), cancel: cancel, waiters: 1}
		g.calls[key] = c
		g.mu.Unlock()
		if ctx.Done() == nil {
			g.run(fctx, key, c, fn)
			return c.val, c.err
		}
		go g.run(fctx, key, c, fn)
	} else {
		c.waiters++
		g.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.leave(key, c)
		return nil, ctx.Err()
	}
}

func (g *Group) run(ctx context.Context, key string, c *call, fn func(context.Context) (any, error)) {
	defer func() {
		if r := recover(); r != nil {
			c.val, c.err = nil, fmt.Errorf("panic loading %q: %v\n%s", key, r, debug.Stack())
		}
		c.cancel()
		g.mu.Lock()
		if g.calls[key] == c {
			delete(g.calls, key)
		}
		g.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = fn(ctx)
}

// leave drops a caller that stopped waiting; the last one to leave
// cancels the load, and a later caller starts a new one.
func (g *Group) leave(key string, c *call) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.waiters--; c.waiters == 0 {
		select {
		case <-c.done:
			return
		default:
		}
		c.cancel()
		if g.calls[key] == c {
			delete(g.calls, key)
		}
	}
}
