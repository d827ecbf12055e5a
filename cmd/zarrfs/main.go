// Command zarrfs mounts sharded Zarr stores so that every inner chunk is a
// file, and inspects, checks and creates stores. Run `zarrfs help`.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
)

const usage = `zarrfs: every inner chunk of a sharded Zarr store as a file.

Usage:
  zarrfs mount [flags] STORE MOUNTPOINT   mount STORE (foreground; Ctrl-C unmounts)
  zarrfs umount MOUNTPOINT                unmount a zarrfs mount
  zarrfs info [--json] STORE [PATH]       show the hierarchy: shapes, types, shards, codecs, stored chunks
  zarrfs check STORE [PATH]               verify every shard, report unpublished journals and deletes cut short; exit 1 naming each
  zarrfs recover STORE                    publish the journals of writers that died into the store
  zarrfs compact STORE [PATH]             rewrite shards holding dead space densely; finish deletes cut short
  zarrfs consolidate STORE                write consolidated metadata, so web servers' readers find every node
  zarrfs demo DIR                         write a sample sharded store (an OME-Zarr image) into DIR, a new directory
  zarrfs version                          print zarrfs's version (also zarrfs --version)

Run 'zarrfs COMMAND -h' for a command's flags; flags go before or after the arguments.
`

// command is one subcommand: it parses its own flags and returns the exit code.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

var commands = map[string]command{
	"info":        runInfo,
	"check":       runCheck,
	"recover":     runRecover,
	"compact":     runCompact,
	"consolidate": runConsolidate,
	"demo":        runDemo,
	"mount":       runMount,
	"umount":      runUmount,
}

func main() {
	ctx, stop := signalContext()
	var code int
	if slices.Contains(helperNames, filepath.Base(os.Args[0])) {
		code = runMountHelper(ctx, os.Args[1:], os.Stdout, os.Stderr)
	} else {
		code = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// interruption is the cause of the commands' context when a signal
// (SIGINT, SIGTERM) ended it.
type interruption struct{ sig syscall.Signal }

func (i interruption) Error() string { return "stopped by " + i.sig.String() }

// signalContext is cancelled by the first SIGINT or SIGTERM, with an
// interruption as its cause; a second one kills the process as usual,
// unless a command watches signals itself (a mount does).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			cancel(interruption{s.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel(nil) }
}

// interrupted returns the exit code of a command a signal stopped, 128
// plus the signal's number as shells report it (130 for Ctrl-C), and
// whether one did.
func interrupted(ctx context.Context) (int, bool) {
	var i interruption
	if errors.As(context.Cause(ctx), &i) {
		return 128 + int(i.sig), true
	}
	return 0, false
}

// buildVersion is set by the linker (-ldflags "-X main.buildVersion=v1.2.3")
// for releases; builds from a checkout say which commit they are.
var buildVersion = ""

// version is zarrfs's version, commit and Go version.
func version() string {
	v := cmp.Or(buildVersion, "(devel)")
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "zarrfs " + v
	}
	if buildVersion == "" && info.Main.Version != "" {
		v = info.Main.Version
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	out := "zarrfs " + v
	if rev != "" {
		out += " commit " + rev[:min(len(rev), 12)] + " " + at + modified
	}
	return out + " " + info.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		fmt.Fprintln(stdout, version())
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "zarrfs: unknown command %q (zarrfs help lists the commands)\n", args[0])
		return 2
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

// fail prints an error and returns exit code 1.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "zarrfs: %v\n", err)
	return 1
}
