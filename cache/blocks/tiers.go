package blocks

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// The tiers, in the order a stack has them: Memory, Disk, Peers, Origin.
// Each looks up the blocks asked of it, asks the next tier for those it
// lacks, and keeps what that returns.

// Memory keeps blocks in the in-memory LRU (cache.Cache) for the reads of
// their neighbours: those a read does not take whole (Request.Off, N).
type Memory struct {
	Cache interface {
		Get(key string) (any, bool)
		Add(key string, value any, size int64)
	}
	Next Source
}

// Blocks implements Source.
func (m *Memory) Blocks(ctx context.Context, o Object, idx []int64, r Request) ([]Block, error) {
	out := make([]Block, len(idx))
	if !r.Fresh {
		for p, i := range idx {
			if v, ok := m.Cache.Get(o.BlockKey(i)); ok {
				out[p], _ = v.(Block)
			}
		}
	}
	pos, want := missing(idx, out)
	if len(want) == 0 {
		return out, nil
	}
	got, err := m.Next.Blocks(ctx, o, want, r)
	if err != nil {
		return nil, err
	}
	for j, p := range pos {
		b := got[j]
		out[p] = b
		if off, n := o.Block(idx[p]); off < r.Off || off+n > r.Off+r.N {
			if b.Trusted {
				b.Bytes = bytes.Clone(b.Bytes) // not the buffer of all the blocks one request read
			}
			m.Cache.Add(o.BlockKey(idx[p]), b, n)
		}
	}
	return out, nil
}

// Disk keeps blocks in the disk cache (diskcache.Cache, which checks
// what it returns against a checksum of key and value). A block on disk
// is used if it passes the request's check, read from the next tier
// otherwise.
type Disk struct {
	Cache interface {
		Get(key string) ([]byte, bool)
		Put(key string, value []byte)
	}
	Next Source
}

// Blocks implements Source.
func (d *Disk) Blocks(ctx context.Context, o Object, idx []int64, r Request) ([]Block, error) {
	out := make([]Block, len(idx))
	if !r.Fresh {
		for p, i := range idx {
			b, ok := d.Cache.Get(o.BlockKey(i))
			if _, n := o.Block(i); !ok || int64(len(b)) != n || r.Check != nil && r.Check(i, b) != nil {
				continue
			}
			out[p] = Block{Bytes: b}
		}
	}
	pos, want := missing(idx, out)
	if len(want) == 0 {
		return out, nil
	}
	got, err := d.Next.Blocks(ctx, o, want, r)
	if err != nil {
		return nil, err
	}
	for j, p := range pos {
		out[p] = got[j]
		d.Cache.Put(o.BlockKey(idx[p]), got[j].Bytes)
	}
	return out, nil
}

// Peers gets blocks through the cluster (cluster.Cluster): each from its
// owner, which reads it from the store once for every node, or loaded
// here (Load, from the next tier) when this node owns it, or its owner
// fails or sends bytes that fail their check. A fresh read goes to the
// next tier.
type Peers struct {
	Cluster interface {
		Get(ctx context.Context, key string, check cluster.Check) ([]byte, error)
	}
	Next Source
}

// peerFetches bounds the blocks of one read asked of peers at once.
const peerFetches = 8

// Blocks implements Source.
func (p *Peers) Blocks(ctx context.Context, o Object, idx []int64, r Request) ([]Block, error) {
	if r.Fresh {
		return p.Next.Blocks(ctx, o, idx, r)
	}
	out := make([]Block, len(idx))
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	slots := make(chan struct{}, peerFetches)
	for j, i := range idx {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			_, want := o.Block(i)
			c := cluster.Check{Size: func(n int64) error {
				if n != want {
					return fmt.Errorf("%d bytes for a block of %d", n, want)
				}
				return nil
			}}
			if r.Check != nil {
				c.Value = func(b []byte) error { return r.Check(i, b) }
			}
			b, err := p.Cluster.Get(ctx, o.BlockKey(i), c)
			if err == nil && int64(len(b)) != want {
				err = fmt.Errorf("%s: the cluster gave %d bytes for a block of %d", o.Key, len(b), want)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				return
			}
			out[j] = Block{Bytes: b}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// Origin reads blocks from the store named Name, one request per run of
// adjacent blocks; it refuses blocks of another store.
type Origin struct {
	Name  string
	Store store.RangeReader
}

// Blocks implements Source.
func (s Origin) Blocks(ctx context.Context, o Object, idx []int64, _ Request) ([]Block, error) {
	if o.Store != s.Name {
		return nil, errors.New("a block of another store")
	}
	out := make([]Block, 0, len(idx))
	for _, i := range idx {
		if i < 0 || i >= o.Blocks() {
			return nil, fmt.Errorf("%s: no block %d in an object of %d bytes", o.Key, i, o.Size)
		}
	}
	for len(idx) > 0 {
		j := 1
		for j < len(idx) && idx[j] == idx[j-1]+1 {
			j++
		}
		start, _ := o.Block(idx[0])
		endOff, endN := o.Block(idx[j-1])
		buf := make([]byte, endOff+endN-start)
		if err := s.Store.ReadAt(ctx, o.Key, o.Gen, buf, start); err != nil {
			return nil, err
		}
		for _, i := range idx[:j] {
			bo, bn := o.Block(i)
			out = append(out, Block{Bytes: buf[bo-start : bo-start+bn : bo-start+bn], Trusted: true})
		}
		idx = idx[j:]
	}
	return out, nil
}
