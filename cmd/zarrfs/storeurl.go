package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/store/registry"
	"github.com/zarrfs/zarrfs/zarr/store/requests"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

// storeFlags are the flags that say how to reach a store: those of every
// kind (stores), and the bounds of remote stores' requests.
type storeFlags struct {
	kinds      *registry.Flags
	journalDir *string
	attempts   *int
	timeout    *time.Duration
	deadline   *time.Duration
	maxDoc     *string
	logger     *slog.Logger // of retries (default: to the flags' output)
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		kinds:      stores.AddFlags(fs),
		attempts:   fs.Int("remote-attempts", 8, "tries of one request to a remote store on 5xx, throttling, dropped connections, cut bodies and timeouts, with backoff and jitter"),
		timeout:    fs.Duration("remote-timeout", 5*time.Second, "how long one try of a request to a remote store waits for the connection and the first byte, and a body may pause; doubles with each try"),
		deadline:   fs.Duration("remote-deadline", 20*time.Second, "how long the tries of one request to a remote store may take together (a body is given time for its size besides)"),
		maxDoc:     fs.String("max-metadata-size", fmt.Sprintf("%dMiB", zarr.DefaultMaxDocumentSize>>20), "the largest metadata document (zarr.json, .zarray, .zattrs, .zmetadata...) read, stored or inflated; a larger one is refused naming its key"),
		journalDir: fs.String("journal-dir", "", "where mounts of remote stores journal writes (default: $XDG_STATE_HOME/zarrfs/journals, one directory per store URL)"),
		logger:     newLogger(fs.Output()),
	}
}

// parse reads a STORE argument.
func (sf storeFlags) parse(arg string) (registry.Location, error) { return sf.kinds.Parse(arg) }

// open opens the store.
func (sf storeFlags) open(ctx context.Context, l registry.Location, readOnly bool) (store.Store, error) {
	if *sf.timeout <= 0 || *sf.deadline <= 0 {
		return nil, fmt.Errorf("--remote-timeout and --remote-deadline must be positive")
	}
	maxDoc, err := parseSize(*sf.maxDoc)
	if err != nil || maxDoc <= 0 {
		return nil, fmt.Errorf("--max-metadata-size %q: a positive size (e.g. 32MiB) wanted", *sf.maxDoc)
	}
	zarr.SetMaxDocumentSize(maxDoc)
	limits := requests.Limits{MaxAttempts: *sf.attempts, Timeout: *sf.timeout, Deadline: *sf.deadline, Logger: sf.logger}
	return l.Open(ctx, registry.Options{ReadOnly: readOnly, Limits: limits})
}

// openJournals opens the directory a mount of the store journals its
// writes in: inside a local store (so any mount of it replays them), as
// STORE/.zarrfs/journal, and for a remote store under dir (default: the
// user's state directory), one directory per store identity (its URL with
// the endpoint). Every directory zarrfs makes there is 0700; an existing
// one must be a plain directory of this user that others cannot write, and
// no other user may be able to change dir or a directory above it
// (writeback.ErrUntrusted otherwise). With create (read-write mounts) what
// is missing is made; without, nil means there are no journals.
func openJournals(l registry.Location, s store.Store, dir string, create bool) (*writeback.JournalRoot, error) {
	switch {
	case l.LocalDir != "":
		return writeback.LocalJournalRoot(l.LocalDir, create)
	case !s.Remote():
		return nil, nil // never written: no journals
	}
	if dir == "" {
		state := os.Getenv("XDG_STATE_HOME")
		if state == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("no --journal-dir and no home directory: %w", err)
			}
			state = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(state, "zarrfs", "journals")
	}
	return writeback.StoreJournalRoot(dir, s.String(), create)
}
