package zarr

import (
	"context"
	"fmt"
	"slices"

	"github.com/zarrfs/zarrfs/zarr/meta"
	"github.com/zarrfs/zarrfs/zarr/store"
)

// Resize stores a new shape in the array's metadata document, leaving every
// other field as stored (attributes other writers set included), with one
// locked read-modify-write (store.Update: a conditional PUT on object
// stores). It fails, changing nothing, if the stored shape is no longer
// a's. It returns the array reopened with the new shape; the caller
// deletes the chunks the shape no longer covers.
func Resize(ctx context.Context, a *Array, shape []int) (*Array, error) {
	if len(shape) != len(a.Shape) {
		return nil, fmt.Errorf("shape: %d dimensions, the array has %d", len(shape), len(a.Shape))
	}
	key, parse := store.Join(a.Path, ZarrJSON), parseResizedV3
	if a.Format == 2 {
		key, parse = store.Join(a.Path, ZArray), parseResizedV2
	}
	var resized *Array
	err := store.Update(ctx, a.store, key, func(cur store.Object) (store.Change, error) {
		b, err := ReadCurrentDocument(cur, key)
		if err != nil {
			return store.Change{}, err
		}
		out, r, err := parse(a, b, shape)
		if err != nil {
			return store.Change{}, fmt.Errorf("%s: %w", key, err)
		}
		resized = r
		return store.Change{Value: [][]byte{out}}, nil
	})
	return resized, err
}

func parseResizedV3(a *Array, b []byte, shape []int) ([]byte, *Array, error) {
	doc, err := meta.ParseV3(b)
	if err != nil {
		return nil, nil, err
	}
	m, ok := doc.(*meta.ArrayV3)
	if !ok || !slices.Equal(m.Shape, a.Shape) {
		return nil, nil, fmt.Errorf("changed by another writer meanwhile")
	}
	m = m.Clone()
	m.Shape = slices.Clone(shape)
	out, err := m.Marshal()
	if err != nil {
		return nil, nil, err
	}
	r, err := openArrayV3(a.store, a.Path, m)
	return out, r, err
}

func parseResizedV2(a *Array, b []byte, shape []int) ([]byte, *Array, error) {
	m, err := meta.ParseZarray(b)
	if err != nil {
		return nil, nil, err
	}
	if !slices.Equal(m.Shape, a.Shape) {
		return nil, nil, fmt.Errorf("changed by another writer meanwhile")
	}
	m = m.Clone()
	m.Shape = slices.Clone(shape)
	out, err := m.Marshal()
	if err != nil {
		return nil, nil, err
	}
	r, err := openArrayV2(a.store, a.Path, m)
	return out, r, err
}
