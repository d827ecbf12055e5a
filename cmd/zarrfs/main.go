// Command zarrfs mounts sharded Zarr stores so that every inner chunk is a
// file, and inspects, checks and creates stores. Run `zarrfs help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
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
  zarrfs demo DIR                         write a sample sharded store to DIR/store

Run 'zarrfs COMMAND -h' for a command's flags.
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if slices.Contains(helperNames, filepath.Base(os.Args[0])) {
		code = runMountHelper(ctx, os.Args[1:], os.Stdout, os.Stderr)
	} else {
		code = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "zarrfs: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

// newFlags returns a flag set that reports errors and -h on stderr.
func newFlags(name, argsUsage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zarrfs %s [flags] %s\n", name, argsUsage)
		// Flags without a usage text are for developers and stay hidden.
		shown := flag.NewFlagSet(name, flag.ContinueOnError)
		shown.SetOutput(stderr)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Usage != "" {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue
			}
		})
		shown.PrintDefaults()
	}
	return fs
}

// parse parses flags and checks the number of positional arguments; it
// returns an exit code and false when the command must stop.
func parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if n := fs.NArg(); n < minArgs || n > maxArgs {
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// fail prints an error and returns exit code 1.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "zarrfs: %v\n", err)
	return 1
}
