package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdFlags are the flags of one command and the positional arguments it
// takes (for its usage line).
type cmdFlags struct {
	*flag.FlagSet
	args    string
	options *mountOptions // -o, for the commands that take it
}

// newFlags returns a command's flag set; -h prints its flags on stderr.
func newFlags(name, argsUsage string, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zarrfs %s [flags] %s\n", name, argsUsage)
		fmt.Fprintf(stderr, "Flags go before or after the arguments; -- ends them.\n")
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
	return &cmdFlags{FlagSet: fs, args: argsUsage}
}

// parse parses flags, before and after the positional arguments, and
// checks how many of those there are; it returns an exit code and false
// when the command must stop. A mistake is answered with one line and a
// hint, -h with the command's flags.
func parse(fs *cmdFlags, args []string, minArgs, maxArgs int) (int, bool) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard) // the errors are printed below, in one line
	fs.Usage = func() {}
	positional, err := parseInterspersed(fs.FlagSet, args)
	fs.SetOutput(out)
	fs.Usage = usage
	hint := "zarrfs " + fs.Name() + " -h"
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return 0, false
	case fs.options != nil && fs.options.err != nil:
		fmt.Fprintf(out, "zarrfs %s: %v (%s lists the flags; an option is a flag with _ for -)\n", fs.Name(), fs.options.err, hint)
		return 2, false
	case err != nil:
		fmt.Fprintf(out, "zarrfs %s: %s (%s lists the flags)\n", fs.Name(), flagError(fs.FlagSet, err), hint)
		return 2, false
	}
	if n := len(positional); n < minArgs || n > maxArgs {
		got := "no arguments"
		if n > 0 {
			got = fmt.Sprintf("%d (%s)", n, strings.Join(positional, " "))
		}
		fmt.Fprintf(out, "zarrfs %s: wants %s, got %s (%s)\n", fs.Name(), fs.args, got, hint)
		return 2, false
	}
	// The positional arguments become fs.Args().
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return 2, false
	}
	return 0, true
}

// parseInterspersed parses the flags in args wherever they are, as GNU
// tools do (`zarrfs mount STORE MNT --ro`), and returns the other
// arguments; everything after -- is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" || len(rest) == 0 {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagError rewords the flag package's errors for people: the flag with
// the dashes they typed, and the flag they may have meant.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !ok {
		return strings.Replace(msg, "for flag -", "for --", 1)
	}
	msg = "unknown flag --" + name
	if s := closest(fs, name); s != "" {
		msg += "; did you mean --" + s + "?"
	}
	return msg
}

// closest is the flag of fs whose name is nearest to name (at most two
// edits away), "" when none is.
func closest(fs *flag.FlagSet, name string) string {
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			return
		}
		if d := editDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
