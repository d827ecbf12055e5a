package keyspace

// Creating groups and arrays through the views. A directory made in a
// group is pending: it holds what is written into it, in memory as
// temporary files are held, until its metadata document arrives (.zgroup
// or .zarray in the v2 view, zarr.json in the v3 view), because cp -r and
// rsync write a directory's files in the order they list them, often
// chunks before .zarray. The document creates the node in the store as
// Zarr v3, an array sharded by the Options.NewShardBytes policy; then the
// files held in the directory become the node's attributes, its chunks and
// its pending subdirectories' nodes. A directory still pending at unmount
// is dropped with its files, and the log says so.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/codec/sharding"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/nd"
	"github.com/zarrfs/zarrfs/zarr/store"
)

const (
	// DefaultNewShardBytes is the default of Options.NewShardBytes: large
	// enough that a store holds few objects, small enough that rewriting
	// a shard for one chunk stays cheap.
	DefaultNewShardBytes = 64 << 20
	// maxInnerPerShard bounds the inner chunks of a new shard, so that its
	// index stays within 1 MiB whatever the chunk size.
	maxInnerPerShard = 1 << 16
)

// maxPendingDirs bounds the directories waiting for their metadata (a
// variable for the tests); their files count against maxTempTotal.
var maxPendingDirs = 1 << 16

// createsNode reports whether a document of this name, written into a
// pending directory of the view, creates its node.
func createsNode(v View, name string) bool {
	if v == V2 {
		return name == zarr.ZArray || name == zarr.ZGroup
	}
	return name == zarr.ZarrJSON
}

// holdsNewNodes reports whether directories made in d become pending
// directories: d is a group of a v3 (or implicit) hierarchy, or pending.
// zarrfs writes v3 nodes only, which have no place in a v2 hierarchy.
func (d *Dir) holdsNewNodes() bool {
	if d.pending {
		return true
	}
	return d.node != nil && d.fs.arrayOf(d.node) == nil && d.node.node != nil && d.node.node.Format != 2
}

// refuseInV2 refuses, saying what the user can do instead, a directory
// made in a group of a Zarr v2 hierarchy (holdsNewNodes): zarrfs creates
// Zarr v3 nodes only, and a v2 hierarchy's readers would not find one.
func (d *Dir) refuseInV2(ctx context.Context, name string) error {
	if d.node == nil || d.node.node == nil || d.fs.arrayOf(d.node) != nil || d.node.node.Format != 2 {
		return nil
	}
	p := joinPath(d.path, name)
	d.fs.opts.Logger.WarnContext(ctx, "mkdir refused: zarrfs creates groups and arrays as Zarr v3 only, and this group is one of a Zarr v2 hierarchy, whose readers would not find them; "+
		"write the new node to the store itself, not through the mount, or into a Zarr v3 store (an empty directory mounted read-write becomes one)", "key", p)
	return fmt.Errorf("%w: /%s: zarrfs creates Zarr v3 nodes only, and /%s is a group of a Zarr v2 hierarchy", ErrPermission, p, d.path)
}

// current returns the directory d stands for now (a kernel keeps the
// directories it looked up): a pending directory whose node was created
// since becomes that node's directory, and the directory of a node (or
// array) replaced since, deleted and created again, resized or moved,
// the one at its path now.
// A directory no longer there is one without entries, which takes none.
func (d *Dir) current(ctx context.Context) *Dir {
	p, stale := d.fs.stale(d)
	if !stale {
		return d
	}
	if cur, ok := d.fs.dirAt(ctx, d.view, p); ok {
		return cur
	}
	return &Dir{fs: d.fs, view: d.view, path: d.path, depth: -1, pending: true, gone: true}
}

// Gone reports whether the directory is no longer there: its node was
// deleted or moved away (in another view), or it was a pending directory
// removed since.
func (d *Dir) Gone(ctx context.Context) bool { return d.current(ctx).gone }

// stale reports whether d is no longer the directory at its path, and the
// path where what it stood for is now.
func (f *FS) stale(d *Dir) (string, bool) {
	if d.pending {
		return d.path, !f.temps.isDir(d.view, d.path)
	}
	if !f.replaced.Load() {
		return "", false
	}
	f.meta.RLock()
	defer f.meta.RUnlock()
	switch {
	case d.node != nil:
		if d.node.node == nil || f.vnodes[d.view][d.path] == d.node {
			return "", false
		}
		if d.node.movedTo != "" {
			return d.node.movedTo, true
		}
	case d.arr != nil:
		if f.arrays[d.arr.path][d.view] == d.arr {
			return "", false
		}
		if d.arr.movedTo != "" {
			return d.arr.movedTo + strings.TrimPrefix(d.path, d.arr.path), true
		}
	default:
		return "", false
	}
	return d.path, true
}

// dirAt resolves the directory at p of a view.
func (f *FS) dirAt(ctx context.Context, v View, p string) (*Dir, bool) {
	cur := f.roots[v]
	if p == "" {
		return cur, true
	}
	for part := range strings.SplitSeq(p, "/") {
		e, err := cur.Lookup(ctx, part)
		if err != nil || e.Dir == nil {
			return nil, false
		}
		cur = e.Dir
	}
	return cur, true
}

// tempHandle returns the write handle of a temporary file just created in
// d: the metadata document of a pending directory creates its node when
// closed.
func (d *Dir) tempHandle(name string, t *tempData) *WriteHandle {
	h := &WriteHandle{temp: t, fs: d.fs, limit: maxTempSize}
	if d.pending && createsNode(d.view, name) {
		v, dir := d.view, d.path
		h.limit = maxDocSize
		h.commit = func(ctx context.Context, content []byte) error {
			_, err := d.fs.create(ctx, v, dir, name, content)
			return err
		}
	}
	return h
}

// renameCreating renames a temporary file onto the metadata document of a
// pending directory, as zarr-python 2 writes every key: it creates the
// node, or, when the directory's parent waits for its own metadata, is
// held there.
func (f *FS) renameCreating(ctx context.Context, v View, src, dir, name string, content []byte) error {
	created, err := f.create(ctx, v, dir, name, content)
	if err != nil {
		return err
	}
	if created {
		f.temps.remove(v, src)
	} else {
		f.temps.move(tempKey(v, src), tempKey(v, joinPath(dir, name)))
	}
	return nil
}

// newNode is a node about to be created.
type newNode struct {
	node *zarr.Node
	doc  []byte // its zarr.json
}

// create validates the metadata document name written into the pending
// directory dir and creates its node; created is false when dir's parent
// is pending too, and the document waits there for it.
func (f *FS) create(ctx context.Context, v View, dir, name string, content []byte) (created bool, err error) {
	key := joinPath(dir, name)
	f.creating.Lock()
	defer f.creating.Unlock()
	nn, err := f.newNode(v, dir, name, content)
	if err != nil {
		f.logOnce(ctx, key, "create refused", "error", err)
		if errors.Is(err, ErrPermission) {
			return false, err
		}
		return false, fmt.Errorf("%w: %s: %v", ErrInvalid, key, err)
	}
	if f.temps.isDir(v, parentOf(dir)) {
		return false, nil
	}
	if err := f.insert(ctx, v, nn); err != nil {
		f.logOnce(ctx, key, "create failed", "error", err)
		return false, err
	}
	return true, nil
}

// newNode translates a metadata document written into the pending
// directory dir into the zarr.json of the node to create there: v2
// metadata as zarr-python's migration does (compressor and filters as v3
// codecs, order F as a transpose, _ARRAY_DIMENSIONS as dimension_names,
// dimension_separator as a v2 chunk key encoding), and an unsharded array
// sharded (shardNew).
func (f *FS) newNode(v View, dir, name string, content []byte) (*newNode, error) {
	nn := &newNode{}
	var doc meta.NodeV3
	switch name {
	case zarr.ZGroup:
		if _, err := meta.ParseZgroup(content); err != nil {
			return nil, err
		}
		attrs, err := f.heldAttributes(v, dir)
		if err != nil {
			return nil, err
		}
		g := &meta.GroupV3{}
		if err := g.SetAttributes(attrs); err != nil {
			return nil, err
		}
		doc = g
	case zarr.ZArray:
		m, err := meta.ParseZarray(content)
		if err != nil {
			return nil, err
		}
		attrs, err := f.heldAttributes(v, dir)
		if err != nil {
			return nil, err
		}
		a, err := fromV2(m, attrs)
		if err != nil {
			return nil, err
		}
		doc = f.shardNew(a)
	default:
		d, err := meta.ParseV3(content)
		if err != nil {
			return nil, err
		}
		if a, ok := d.(*meta.ArrayV3); ok && !slices.ContainsFunc(a.Codecs, func(c meta.Codec) bool { return c.Name == sharding.Name }) {
			d = f.shardNew(a)
		}
		doc = d
	}
	n, err := zarr.NewNode(f.store, dir, doc)
	if err != nil {
		return nil, err
	}
	if err := chunkFits(n.Array); err != nil {
		return nil, err
	}
	if nn.doc, err = doc.Marshal(); err != nil {
		return nil, err
	}
	nn.node = n
	return nn, nil
}

// heldAttributes returns the attributes of a .zattrs held in a pending
// directory of the v2 view (nil if none).
func (f *FS) heldAttributes(v View, dir string) (json.RawMessage, error) {
	t := f.temps.get(v, joinPath(dir, zarr.ZAttrs))
	if v != V2 || t == nil {
		return nil, nil
	}
	t.mu.Lock()
	b := slices.Clone(t.data)
	t.mu.Unlock()
	return meta.ParseZattrs(b)
}

// fromV2 returns the unsharded v3 array equivalent to a v2 array.
func fromV2(m *meta.ArrayV2, attrs json.RawMessage) (*meta.ArrayV3, error) {
	typ, chain, err := codec.FromV2(m.DataType, m.Endian, m.Order, m.Rank(), m.Filters, m.Compressor)
	if err != nil {
		return nil, err
	}
	fill := m.FillValue
	if fill == nil && !typ.Variable() {
		fill = make([]byte, typ.Size) // v2 "no fill value": v3 has one; zeros as v2 readers use
	}
	if fill == nil {
		fill = []byte{}
	}
	names, attrs := dimensionNames(attrs, m.Rank())
	if attrs, err = withV2Said(attrs, m); err != nil {
		return nil, err
	}
	if attrs, err = withV2SaidCodecs(attrs, m, typ, chain); err != nil {
		return nil, err
	}
	return &meta.ArrayV3{
		Shape: m.Shape, DataType: typ, ChunkShape: m.Chunks,
		KeyEncoding: meta.KeyEncoding{Name: meta.KeyEncodingV2, Separator: m.DimensionSeparator},
		FillValue:   fill, Codecs: chain, DimensionNames: names, Attributes: attrs,
	}, nil
}

// dimensionNames moves xarray's _ARRAY_DIMENSIONS out of v2 attributes,
// as dimension names; attributes without a valid one are unchanged.
func dimensionNames(attrs json.RawMessage, rank int) ([]*string, json.RawMessage) {
	var fields map[string]json.RawMessage
	var names []string
	if json.Unmarshal(attrs, &fields) != nil || json.Unmarshal(fields["_ARRAY_DIMENSIONS"], &names) != nil || len(names) != rank {
		return nil, attrs
	}
	delete(fields, "_ARRAY_DIMENSIONS")
	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, attrs
	}
	out := make([]*string, rank)
	for i := range names {
		out[i] = &names[i]
	}
	return out, rest
}

// shardNew returns a stored as a sharded array: its chunks become the
// inner chunks, its codecs the inner codecs, with a crc32c-protected index
// at the end of each shard. A shard holds whole inner chunks up to
// Options.NewShardBytes uncompressed, taken along the last axis first (the
// order C-order writers fill them), no more than the array has along each
// axis; a negative policy keeps the array unsharded.
func (f *FS) shardNew(a *meta.ArrayV3) *meta.ArrayV3 {
	target := f.opts.NewShardBytes
	if target == 0 {
		target = DefaultNewShardBytes
	}
	if target < 0 || len(a.Shape) == 0 {
		return a
	}
	inner := a.ChunkShape
	per := int64(1)
	elems, ok := nd.SizeFits(inner)
	if size := int64(max(a.DataType.Size, 1)); ok && int64(elems) <= target/size {
		per = min(target/(int64(elems)*size), maxInnerPerShard)
	}
	grid := nd.Grid(a.Shape, inner)
	shard := slices.Clone(inner)
	for i := len(inner) - 1; i >= 0 && per > 1; i-- {
		k := int(min(int64(max(grid[i], 1)), per))
		if inner[i] > math.MaxInt/k {
			k = 1
		}
		shard[i] = inner[i] * k
		per /= int64(k)
	}
	return a.WithChunking(shard, zarr.ShardedCodecs(inner, a.Codecs))
}

// insert writes a new node's zarr.json (only if nothing is there), adds it
// to the hierarchy and the views, and has it adopt what its directory
// held. f.creating is held.
func (f *FS) insert(ctx context.Context, v View, nn *newNode) error {
	p := nn.node.Path
	parent, ok := f.h.Node(parentOf(p))
	if !ok || parent.Kind != zarr.GroupKind || parent.Format == 2 {
		return fmt.Errorf("%w: /%s: its parent is not a group of a Zarr v3 hierarchy", ErrPermission, p)
	}
	if _, exists := f.h.Node(p); exists {
		return fmt.Errorf("%w: /%s: a node is there already", ErrExists, p)
	}
	if err := f.storeRoot(ctx); err != nil {
		return err
	}
	// A delete of an array here cut short left its tombstone and shards:
	// they go first, so the new node shows none of them.
	gone, err := zarr.FinishDeletesAt(ctx, f.store, p)
	f.shardsGone(gone)
	if err != nil {
		return fmt.Errorf("the delete of an earlier array at /%s did not finish, so nothing can be created there: %w", p, err)
	}
	key := store.Join(p, zarr.ZarrJSON)
	if _, err := store.Put(ctx, f.store, key, [][]byte{nn.doc}, store.Cond{IfNoneMatch: store.AnyGeneration}); err != nil {
		if errors.Is(err, store.ErrPrecondition) {
			return fmt.Errorf("%w: %s is in the store already", ErrExists, key)
		}
		return err
	}
	if err := f.h.Insert(nn.node); err != nil {
		return err
	}
	f.addNode(ctx, nn)
	f.temps.dropDir(v, p)
	// A group's .zmetadata held before it existed gives way to the one
	// derived from the hierarchy, as one written later would.
	group := nn.node.Array == nil
	for _, name := range []string{zarr.ZArray, zarr.ZGroup, zarr.ZarrJSON, zarr.ZAttrs, zarr.ZMetadata} {
		if createsNode(v, name) || v == V2 && (name == zarr.ZAttrs || name == zarr.ZMetadata && group) {
			f.temps.remove(v, joinPath(p, name)) // now the node's documents
		}
	}
	args := []any{"key", key}
	if a := nn.node.Array; a != nil {
		args = append(args, "shape", a.Shape, "chunks", a.ChunkShape, "codecs", meta.ChainString(a.Codecs))
	}
	f.opts.Logger.InfoContext(ctx, "created", args...)
	f.created.Store(p, true)
	f.adopt(ctx, v, nn.node)
	return nil
}

// addNode adds a created node to both views.
func (f *FS) addNode(ctx context.Context, nn *newNode) {
	n := nn.node
	vns := map[View]*vnode{}
	for _, v := range []View{V3, V2} {
		vn, err := f.newVnode(n, v)
		if err != nil {
			f.logOnce(ctx, n.Path, "node left out of the "+v.String()+" view", "error", err)
			continue
		}
		vns[v] = vn
	}
	name := path.Base(n.Path)
	f.meta.Lock()
	for v, vn := range vns {
		parent := f.vnodes[v][parentOf(n.Path)]
		if parent == nil {
			continue
		}
		f.vnodes[v][n.Path] = vn
		f.addArrayView(vn)
		parent.children[name] = vn
		i, _ := slices.BinarySearch(parent.names, name)
		parent.names = slices.Insert(slices.Clone(parent.names), i, name) // readers hold the old one
	}
	f.staleConsolidated()
	f.meta.Unlock()
	f.notifyConsolidated(n.Path)
}

// adopt turns what the directory of a node just created held into the
// node's: an array's files become its chunks (files that are not chunks
// stay temporary files), a group's pending subdirectories holding their
// metadata document become its nodes.
func (f *FS) adopt(ctx context.Context, v View, n *zarr.Node) {
	if n.Array != nil {
		for _, p := range f.temps.dropDirsUnder(v, n.Path) {
			f.madeDirs.Store(tempKey(v, p), true) // chunk key directories now
		}
		for _, p := range f.temps.filesUnder(v, n.Path) {
			f.adoptChunk(ctx, v, p)
		}
		return
	}
	for _, sub := range f.temps.dirsIn(v, n.Path) {
		dir := joinPath(n.Path, sub)
		for _, name := range []string{zarr.ZArray, zarr.ZGroup, zarr.ZarrJSON} {
			t := f.temps.get(v, joinPath(dir, name))
			if t == nil || !createsNode(v, name) {
				continue
			}
			t.mu.Lock()
			content := slices.Clone(t.data)
			t.mu.Unlock()
			nn, err := f.newNode(v, dir, name, content)
			if err == nil {
				err = f.insert(ctx, v, nn)
			}
			if err != nil {
				f.logOnce(ctx, joinPath(dir, name), "held metadata document refused; its directory stays pending", "error", err)
			}
			break
		}
	}
}

// adoptChunk commits a file held for a new array as its chunk.
func (f *FS) adoptChunk(ctx context.Context, v View, p string) {
	t := f.temps.get(v, p)
	d, ok := f.dirAt(ctx, v, parentOf(p))
	if t == nil || !ok {
		return
	}
	av, coords, ok := d.chunkAt(path.Base(p))
	if !ok {
		return // not a chunk: it stays a temporary file
	}
	t.mu.Lock()
	content := slices.Clone(t.data)
	t.mu.Unlock()
	if err := av.commitChunk(ctx, p, coords, content); err != nil {
		f.logOnce(ctx, p, "file held for the new array refused as its chunk; it stays a temporary file", "error", err)
		return
	}
	f.temps.remove(v, p)
}

// acceptConsolidated takes a .zmetadata written by a consolidating writer
// (zarr.consolidate_metadata, xarray): the view derives its own from the
// hierarchy, so one that parses is accepted and not stored.
func (f *FS) acceptConsolidated(ctx context.Context, key string, content []byte) error {
	if _, err := meta.ParseConsolidated(content); err != nil {
		f.logOnce(ctx, key, "metadata edit refused: not consolidated metadata", "error", err)
		return fmt.Errorf("%w: %s: %v", ErrInvalid, key, err)
	}
	return nil
}

// mkdir makes a pending directory.
func (t *temps) mkdir(v View, p string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirs) >= maxPendingDirs {
		return fmt.Errorf("%w: %d directories wait for their metadata; at most %d", ErrNoSpace, len(t.dirs), maxPendingDirs)
	}
	if t.dirs == nil {
		t.dirs = map[string]bool{}
	}
	t.dirs[tempKey(v, p)] = true
	return nil
}

func (t *temps) isDir(v View, p string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dirs[tempKey(v, p)]
}

// dirsIn lists the pending directories directly in a directory, sorted.
func (t *temps) dirsIn(v View, dir string) []string {
	prefix := tempKey(v, joinPath(dir, ""))
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for k := range t.dirs {
		if rest, ok := strings.CutPrefix(k, prefix); ok && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	slices.Sort(names)
	return names
}

// rmdir removes an empty pending directory.
func (t *temps) rmdir(v View, p string) error {
	prefix := tempKey(v, p+"/")
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.files {
		if strings.HasPrefix(k, prefix) {
			return fmt.Errorf("%w: /%s is not empty", ErrExists, p)
		}
	}
	for k := range t.dirs {
		if strings.HasPrefix(k, prefix) {
			return fmt.Errorf("%w: /%s is not empty", ErrExists, p)
		}
	}
	delete(t.dirs, tempKey(v, p))
	return nil
}

// dropDir forgets a pending directory (not what it holds).
func (t *temps) dropDir(v View, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.dirs, tempKey(v, p))
}

// dropDirsUnder forgets the pending directories below p and returns
// their paths.
func (t *temps) dropDirsUnder(v View, p string) []string {
	view, prefix := tempKey(v, ""), tempKey(v, p+"/")
	t.mu.Lock()
	defer t.mu.Unlock()
	var dropped []string
	for k := range t.dirs {
		if strings.HasPrefix(k, prefix) {
			delete(t.dirs, k)
			dropped = append(dropped, strings.TrimPrefix(k, view))
		}
	}
	return dropped
}

// filesUnder lists the paths of the temporary files below p, sorted.
func (t *temps) filesUnder(v View, p string) []string {
	view := tempKey(v, "")
	prefix := tempKey(v, p+"/")
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k := range t.files {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, view))
		}
	}
	slices.Sort(out)
	return out
}

// abandonedDir is a pending directory whose metadata never arrived,
// with the files it and its subdirectories hold.
type abandonedDir struct {
	view, path string
	files      int
	bytes      int64
}

// abandoned lists the pending directories whose metadata never arrived,
// each with what it holds; a directory inside another is counted with it.
func (f *FS) abandoned() []abandonedDir {
	f.temps.mu.Lock()
	defer f.temps.mu.Unlock()
	var out []abandonedDir
	for k := range f.temps.dirs {
		view, p, _ := strings.Cut(k, ":")
		if f.temps.dirs[tempKey(viewNamed(view), parentOf(p))] {
			continue // told with its top directory
		}
		d := abandonedDir{view: view, path: p}
		for fk, t := range f.temps.files {
			if strings.HasPrefix(fk, k+"/") {
				d.files, d.bytes = d.files+1, d.bytes+t.counted
			}
		}
		out = append(out, d)
	}
	return out
}

// Abandoned counts what unmounting drops: the pending directories whose
// metadata never arrived, and the files written into them, which are not
// in the store.
func (f *FS) Abandoned() (dirs, files int, bytes int64) {
	for _, d := range f.abandoned() {
		dirs, files, bytes = dirs+1, files+d.files, bytes+d.bytes
	}
	return dirs, files, bytes
}

// logAbandoned logs, at unmount, each directory that never got its
// metadata: it and the files it holds are dropped.
func (f *FS) logAbandoned() {
	for _, d := range f.abandoned() {
		f.opts.Logger.Warn("directory dropped at unmount: its metadata (.zgroup, .zarray or zarr.json) never arrived, so nothing of it was stored",
			"view", d.view, "path", d.path, "files", d.files, "bytes", d.bytes)
	}
}

func viewNamed(s string) View {
	if s == V2.String() {
		return V2
	}
	return V3
}

// createdDimensions returns the dimension names of a .zattrs written to
// the v2 view of an array created by this mount without them: xarray
// writes _ARRAY_DIMENSIONS after the .zarray, and the store keeps them as
// dimension_names, as when they come first. ok is false for any other
// write.
func (f *FS) createdDimensions(n *zarr.Node, attrs json.RawMessage) (names []*string, rest json.RawMessage, ok bool) {
	if _, created := f.created.Load(n.Path); !created || n.Array == nil || n.Array.V3 == nil {
		return nil, nil, false
	}
	f.meta.RLock()
	named := n.Array.V3.DimensionNames != nil
	f.meta.RUnlock()
	if named {
		return nil, nil, false
	}
	names, rest = dimensionNames(attrs, len(n.Array.Shape))
	return names, rest, names != nil
}

// setDimensionNames stores the dimension names and attributes of an array
// created by this mount (createdDimensions).
func (f *FS) setDimensionNames(ctx context.Context, n *zarr.Node, names []*string, attrs json.RawMessage) error {
	err := store.Update(ctx, f.store, store.Join(n.Path, zarr.ZarrJSON), func(cur store.Object) (store.Change, error) {
		b, err := zarr.ReadCurrentDocument(cur, store.Join(n.Path, zarr.ZarrJSON))
		if err != nil {
			return store.Change{}, err
		}
		doc, err := meta.ParseV3(b)
		a, ok := doc.(*meta.ArrayV3)
		if err != nil || !ok {
			return store.Change{}, fmt.Errorf("%w: zarr.json is no longer an array's: %v", ErrPermission, err)
		}
		a.DimensionNames = names
		attrs = keepV2Said(a.Attributes, attrs)
		if err := a.SetAttributes(attrs); err != nil {
			return store.Change{}, err
		}
		out, err := a.Marshal()
		return store.Change{Value: [][]byte{out}}, err
	})
	if err != nil {
		return err
	}
	f.meta.Lock()
	n.Array.V3.DimensionNames = names
	f.meta.Unlock()
	if err := f.applyAttributes(n, attrs); err != nil {
		return err
	}
	f.notify(Alias{View: V3, Dir: n.Path, Name: zarr.ZarrJSON})
	f.notify(Alias{View: V2, Dir: n.Path, Name: zarr.ZAttrs})
	f.notifyConsolidated(n.Path)
	return nil
}

// hiddenDoc reports whether the v2 view leaves out the .zattrs of a node
// created by this mount that has no attributes yet: cp -r creates the file
// with O_EXCL in the directory it made, after the .zgroup or .zarray.
func (f *FS) hiddenDoc(v View, vn *vnode, d doc) bool {
	if v != V2 || d.name != zarr.ZAttrs || vn.node == nil || len(jsonFields(d.data)) > 0 {
		return false
	}
	_, created := f.created.Load(vn.node.Path)
	return created
}

// hiddenDocAt returns the document name of d when the view leaves it out
// (hiddenDoc): creating it writes it.
func (d *Dir) hiddenDocAt(name string) *Document {
	if d.node == nil {
		return nil
	}
	for _, doc := range d.fs.docs(d.node) {
		if doc.name == name && d.fs.hiddenDoc(d.view, d.node, doc) {
			return &Document{place: place{fs: d.fs, view: d.view, path: joinPath(d.path, name)}, node: d.node, name: name}
		}
	}
	return nil
}

// unmade reports whether the chunk key directory at p (below the chunks
// whose coordinates start with prefix) of an array created by this mount
// is absent: nothing made it and no chunk below it is stored. A writer
// that made the array's directory (cp -r) makes these with mkdir, which
// the kernel refuses for a name that exists; in other arrays they always
// exist.
func (f *FS) unmade(ctx context.Context, av *arrayView, p string, prefix []int) bool {
	if _, created := f.created.Load(av.path); !created {
		return false
	}
	if _, made := f.madeDirs.Load(tempKey(av.view, p)); made {
		return false
	}
	for range av.stored(ctx, prefix) {
		return false // one stored chunk (or an error) shows the directory
	}
	return true
}

// makeChunkDir makes the chunk key directory name in d, when it names one
// of an array created by this mount.
func (d *Dir) makeChunkDir(ctx context.Context, name string) bool {
	av := d.arr
	if d.node != nil {
		av = d.fs.arrayOf(d.node)
	}
	if av == nil {
		return false
	}
	if _, created := d.fs.created.Load(av.path); !created {
		return false
	}
	key := tempKey(d.view, joinPath(d.path, name))
	d.fs.madeDirs.Store(key, true)
	if e, err := d.Lookup(ctx, name); err != nil || e.Dir == nil {
		d.fs.madeDirs.Delete(key)
		return false
	}
	return true
}

// chunkFits refuses an array whose chunks (inner chunks) the views could
// not hold in memory, to serve or to take a write.
func chunkFits(a *zarr.Array) error {
	if a == nil {
		return nil
	}
	chunk := a.ChunkShape
	if sh := a.Sharding(); sh != nil {
		chunk = sh.ChunkShape()
	}
	if n, ok := nd.SizeFits(chunk); !ok || n > codec.MaxDecodedSize/max(a.Type.Size, 1) {
		return fmt.Errorf("a chunk of shape %v holds more than the %d bytes zarrfs serves as one file", chunk, codec.MaxDecodedSize)
	}
	return nil
}

// mkdirPending makes the pending directory name in d, unless the name is
// one stores keep for their machinery (a node there would write into it).
func (d *Dir) mkdirPending(ctx context.Context, name string) error {
	p := joinPath(d.path, name)
	if store.Reserved(name) {
		d.fs.logOnce(ctx, p, "mkdir refused: the name is reserved for the store's own files")
		return fmt.Errorf("%w: %s: a name reserved for the store's own files", ErrPermission, p)
	}
	return d.fs.temps.mkdir(d.view, p)
}
