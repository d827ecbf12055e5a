package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
)

// nodeInfo is what `zarrfs info` reports about one node (also its --json form).
type nodeInfo struct {
	Path       string          `json:"path"`
	Kind       string          `json:"kind"`
	Format     int             `json:"zarr_format,omitempty"`
	Attributes json.RawMessage `json:"attributes,omitempty"`
	Error      string          `json:"error,omitempty"`

	Shape      []int    `json:"shape,omitempty"`
	DataType   string   `json:"data_type,omitempty"`
	ChunkShape []int    `json:"chunk_shape,omitempty"`
	Codecs     []string `json:"codecs,omitempty"`

	Sharded         bool     `json:"sharded,omitempty"`
	InnerChunkShape []int    `json:"inner_chunk_shape,omitempty"`
	InnerCodecs     []string `json:"inner_codecs,omitempty"`
	IndexCodecs     []string `json:"index_codecs,omitempty"`
	IndexLocation   string   `json:"index_location,omitempty"`

	ChunksStored      int   `json:"chunks_stored"`
	ChunksTotal       int   `json:"chunks_total"`
	InnerChunksStored int   `json:"inner_chunks_stored,omitempty"`
	InnerChunksEmpty  int   `json:"inner_chunks_empty,omitempty"`
	StoredBytes       int64 `json:"stored_bytes"`
	BrokenChunks      int   `json:"broken_chunks,omitempty"`
}

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("info", "STORE [PATH]", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per node")
	sf := addStoreFlags(fs.FlagSet)
	if code, ok := parse(fs, args, 1, 2); !ok {
		return code
	}
	o, err := openNodes(ctx, fs.Arg(0), fs.Arg(1), sf, true)
	if err != nil {
		return fail(stderr, err)
	}
	defer o.store.Close()
	if err := o.h.Undiscoverable(); err != nil {
		fmt.Fprintf(stderr, "zarrfs: warning: %v\n", err)
	}
	nodes := o.nodes
	e := engine.New(o.store, engine.Options{})
	defer e.Close()
	p := startProgress("info", "shards", stderr)
	if total, err := countObjects(ctx, nodes, false); err == nil {
		p.setTotal(total)
	}
	infos := make([]nodeInfo, 0, len(nodes))
	for _, n := range nodes {
		in := describe(ctx, e, n, p)
		if ctx.Err() != nil {
			break // a node read in part is not shown
		}
		infos = append(infos, in)
	}
	p.end()
	nodes = nodes[:len(infos)]
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, in := range infos {
			enc.Encode(in)
		}
	} else {
		printTree(stdout, store.Redacted(fs.Arg(0)), nodes, infos)
	}
	if code, stopped := interrupted(ctx); stopped {
		fmt.Fprintf(stderr, "zarrfs info: INTERRUPTED: %d of %d nodes shown, having read %d of %d shard indexes %s\n", len(nodes), len(o.nodes), p.done.Load(), p.total.Load(), p)
		return code
	}
	return 0
}

// openedStore is a store opened by a command, with its hierarchy and the
// nodes the command works on.
type openedStore struct {
	loc   registry.Location
	store store.Store
	h     *zarr.Hierarchy
	nodes []*zarr.Node
}

// openNodes opens the store and finds the nodes at and below path; the
// caller closes the store.
func openNodes(ctx context.Context, storeArg, path string, sf storeFlags, readOnly bool) (*openedStore, error) {
	loc, err := sf.parse(storeArg)
	if err != nil {
		return nil, err
	}
	s, err := sf.open(ctx, loc, readOnly)
	if err != nil {
		return nil, err
	}
	h, err := zarr.Open(ctx, s)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", store.Redacted(storeArg), err)
	}
	path = strings.Trim(path, "/")
	if _, ok := h.Node(path); !ok {
		s.Close()
		return nil, fmt.Errorf("%s: no group or array at %q", store.Redacted(storeArg), path)
	}
	var nodes []*zarr.Node
	for _, n := range h.Nodes() {
		if path == "" || n.Path == path || strings.HasPrefix(n.Path, path+"/") {
			nodes = append(nodes, n)
		}
	}
	return &openedStore{loc: loc, store: s, h: h, nodes: nodes}, nil
}

// describe gathers a node's info, reading every shard index of arrays,
// each counted in p.
func describe(ctx context.Context, e *engine.Engine, n *zarr.Node, p *progress) nodeInfo {
	in := nodeInfo{Path: "/" + n.Path, Kind: "group", Format: n.Format, Attributes: n.Attributes}
	if n.Kind == zarr.ArrayKind {
		in.Kind = "array"
	}
	if n.Err != nil {
		in.Error = n.Err.Error()
	}
	a := n.Array
	if a == nil {
		return in
	}
	in.Shape, in.DataType, in.ChunkShape = a.Shape, a.Type.String(), a.ChunkShape
	in.Codecs = codecNames(a.Codecs)
	in.ChunksTotal = nd.Size(a.Grid())
	innerTotal := in.ChunksTotal
	if sh := a.Sharding(); sh != nil {
		cfg := sh.Config()
		in.Sharded = true
		in.InnerChunkShape = sh.ChunkShape()
		in.InnerCodecs = codecNames(cfg.Codecs)
		in.IndexCodecs = codecNames(cfg.IndexCodecs)
		in.IndexLocation = "end"
		if sh.IndexAtStart() {
			in.IndexLocation = "start"
		}
		innerTotal = nd.Size(nd.Grid(a.Shape, sh.ChunkShape()))
	}
	for r, err := range e.Array(a).Inspect(ctx, false, runtime.GOMAXPROCS(0)*4) {
		if err == nil {
			p.add(1, 0)
		}
		if err != nil || r.Err != nil {
			in.BrokenChunks++
			continue
		}
		in.ChunksStored++
		in.InnerChunksStored += r.Stored
		in.StoredBytes += r.StoredBytes
	}
	if in.Sharded {
		in.InnerChunksEmpty = innerTotal - in.InnerChunksStored
	}
	return in
}

// codecNames formats codecs as name(key=value, ...).
func codecNames(cs []meta.Codec) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

func printTree(w io.Writer, dir string, nodes []*zarr.Node, infos []nodeInfo) {
	for i, n := range nodes {
		in := infos[i]
		depth := 0
		if n.Path != "" {
			depth = strings.Count(n.Path, "/") + 1
		}
		indent := strings.Repeat("    ", depth)
		name := n.Name()
		if n.Path == "" {
			name = dir
		}
		format := fmt.Sprintf("v%d", in.Format)
		if in.Format == 0 {
			format = "implicit"
		}
		fmt.Fprintf(w, "%s%s  (%s %s)\n", indent, name, format, in.Kind)
		detail := indent + "    "
		if in.Error != "" {
			fmt.Fprintf(w, "%sERROR: %s\n", detail, in.Error)
		}
		if len(in.Attributes) > 2 {
			fmt.Fprintf(w, "%sattributes: %s\n", detail, abbreviate(string(in.Attributes), 100))
		}
		if in.DataType == "" {
			continue
		}
		fmt.Fprintf(w, "%sshape %v  %s\n", detail, in.Shape, in.DataType)
		if in.Sharded {
			fmt.Fprintf(w, "%sshards %v of inner chunks %v, index at %s: %s\n", detail, in.ChunkShape, in.InnerChunkShape, in.IndexLocation, strings.Join(in.IndexCodecs, " -> "))
			fmt.Fprintf(w, "%sinner codecs: %s\n", detail, strings.Join(in.InnerCodecs, " -> "))
			fmt.Fprintf(w, "%sstored: %d/%d shards, %d inner chunks (%d empty), %s\n", detail,
				in.ChunksStored, in.ChunksTotal, in.InnerChunksStored, in.InnerChunksEmpty, humanBytes(in.StoredBytes))
		} else {
			fmt.Fprintf(w, "%schunks %v, codecs: %s\n", detail, in.ChunkShape, strings.Join(in.Codecs, " -> "))
			fmt.Fprintf(w, "%sstored: %d/%d chunks, %s\n", detail, in.ChunksStored, in.ChunksTotal, humanBytes(in.StoredBytes))
		}
		if in.BrokenChunks > 0 {
			fmt.Fprintf(w, "%sBROKEN: %d chunks unreadable (run zarrfs check)\n", detail, in.BrokenChunks)
		}
	}
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
