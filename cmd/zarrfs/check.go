package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", "STORE [PATH]", stderr)
	sf := addStoreFlags(fs.FlagSet)
	if code, ok := parse(fs, args, 1, 2); !ok {
		return code
	}
	o, err := openNodes(ctx, fs.Arg(0), fs.Arg(1), sf, true)
	if err != nil {
		return fail(stderr, err)
	}
	defer o.store.Close()
	e := engine.New(o.store, engine.Options{})
	defer e.Close()
	p := startProgress("check", "shards", stderr)
	if total, err := countObjects(ctx, o.nodes, false); err == nil {
		p.setTotal(total)
	} // else the array's listing fails again below, and is reported
	var broken []engine.ObjectReport
	arrays, chunks := 0, 0
	for _, n := range o.nodes {
		if ctx.Err() != nil {
			break
		}
		if n.Err != nil {
			broken = append(broken, engine.ObjectReport{Key: n.Path, Err: n.Err})
			continue
		}
		if n.Array == nil {
			continue
		}
		arrays++
		for r, err := range e.Array(n.Array).Inspect(ctx, true, runtime.GOMAXPROCS(0)*2) {
			if err != nil {
				if ctx.Err() == nil {
					broken = append(broken, engine.ObjectReport{Key: r.Key, Err: fmt.Errorf("list chunks: %w", err)})
				}
				break
			}
			if ctx.Err() != nil && errors.Is(r.Err, ctx.Err()) {
				break // not checked: the command was stopped
			}
			chunks++
			p.add(1, r.Size)
			if r.Err != nil {
				broken = append(broken, r)
			}
		}
	}
	p.end()
	slices.SortFunc(broken, func(a, b engine.ObjectReport) int { return cmp.Compare(a.Key, b.Key) })
	for _, r := range broken {
		fmt.Fprintf(stdout, "BROKEN %s: %s\n", r.Key, strings.ReplaceAll(r.Err.Error(), "\n", "; "))
	}
	if code, stopped := interrupted(ctx); stopped {
		fmt.Fprintf(stdout, "INTERRUPTED: checked %d of %d stored chunks/shards (in %d arrays), %s: %d broken so far; the rest is not checked\n", chunks, p.total.Load(), arrays, p, len(broken))
		return code
	}
	if err := ctx.Err(); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "checked %d arrays, %d stored chunks/shards: %d broken (%s)\n", arrays, chunks, len(broken), p)
	unpublished, err := reportJournals(o, sf, stdout, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	deleted, err := reportDeleted(ctx, o, fs.Arg(1), stdout)
	if err != nil {
		return fail(stderr, err)
	}
	if len(broken) > 0 || unpublished || deleted {
		return 1
	}
	return 0
}

// reportJournals names the journals that hold writes the store does not:
// those of live writers (published as they go) and those of writers that
// died, whose updates only `zarrfs recover` or a read-write mount
// publishes. It reports whether a dead writer's journal holds updates.
func reportJournals(o *openedStore, sf storeFlags, stdout, stderr io.Writer) (bool, error) {
	root, err := openJournals(o.loc, o.store, *sf.journalDir, false)
	if err != nil {
		// As a read-only mount does: the shards are checked all the same.
		fmt.Fprintf(stderr, "journals not read: %v\n", err)
		return false, nil
	}
	if root != nil {
		defer root.Close()
	}
	infos, err := writeback.Journals(o.h, root, newLogger(stderr))
	if err != nil {
		return false, err
	}
	unpublished := false
	for _, j := range infos {
		switch {
		case j.Stray:
			unpublished = reportStray(stdout, j) || unpublished
		case j.Alive:
			fmt.Fprintf(stdout, "JOURNAL %s: its writer is running and publishes it\n", j.Dir)
		case j.Records > 0:
			unpublished = true
			fmt.Fprintf(stdout, "UNPUBLISHED %s: %d updates of %d shards (%s) from a writer that died; the store does not hold them: run zarrfs recover\n",
				j.Dir, j.Records, len(j.Shards), abbreviate(strings.Join(j.Shards, " "), 200))
		}
	}
	return unpublished, nil
}

// reportStray names a journal that is not the store's but that its user
// must hear of (writeback.JournalInfo.Stray), and reports whether it holds
// updates of a writer that died.
func reportStray(stdout io.Writer, j writeback.JournalInfo) bool {
	theirs := "another store's, in this store's journal directory (zarrfs recover of that store publishes it)"
	if j.OtherEndpoint {
		theirs = "the same bucket and prefix through another endpoint: if that is this store's server under another name, zarrfs recover with that endpoint publishes it"
	}
	switch {
	case j.Alive:
		fmt.Fprintf(stdout, "JOURNAL %s of %s: its writer is running; %s\n", j.Dir, j.Store, theirs)
		return false
	case j.Records > 0:
		fmt.Fprintf(stdout, "ELSEWHERE %s: %d updates of %d shards (%s) of %s, not published into this store: %s\n",
			j.Dir, j.Records, len(j.Shards), abbreviate(strings.Join(j.Shards, " "), 200), j.Store, theirs)
		return true
	}
	return false
}
