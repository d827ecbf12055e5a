package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// fstabOnly are the options of fstab lines that mount(8), systemd or the
// kernel act on, not zarrfs (FUSE mounts are nosuid and nodev anyway).
var fstabOnly = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "_netdev": true, "nofail": true,
	"user": true, "users": true, "nouser": true, "owner": true, "group": true,
	"dev": true, "nodev": true, "suid": true, "nosuid": true, "exec": true, "noexec": true,
	"async": true, "atime": true, "noatime": true, "diratime": true, "nodiratime": true,
	"relatime": true, "norelatime": true, "strictatime": true, "lazytime": true, "rw": true,
}

// mountOptions is the -o flag of zarrfs mount: mount options as fstab and
// mount(8) write them, each the flag of its name with _ read as -
// (ro is --ro, allow_other --allow-other, cache_size=1GiB
// --cache-size=1GiB). Options for mount(8), systemd and the kernel are
// left out; any other is refused by its name.
type mountOptions struct {
	fs *flag.FlagSet
	// set maps the flags set by options to the options that set them, so
	// that errors name what the operator wrote.
	set map[string]string
	err error // the first option refused, named as written
}

// addMountOptions registers -o in fs.
func addMountOptions(fs *cmdFlags) *mountOptions {
	o := &mountOptions{fs: fs.FlagSet, set: map[string]string{}}
	fs.Var(o, "o", "mount options, as in fstab: -o ro,allow_other,cache_size=1GiB (each is the flag of its name with _ for -)")
	fs.options = o
	return o
}

func (o *mountOptions) String() string { return "" }

// Set applies the options at once, so that flags after -o override them
// and flags before it are overridden, in the order given.
func (o *mountOptions) Set(list string) error {
	for opt := range strings.SplitSeq(list, ",") {
		if err := o.apply(opt); err != nil {
			if o.err == nil {
				o.err = err
			}
			return err
		}
	}
	return nil
}

func (o *mountOptions) apply(opt string) error {
	name, value, hasValue := strings.Cut(opt, "=")
	if opt == "" || fstabOnly[name] || strings.HasPrefix(name, "x-") || name == "comment" {
		return nil
	}
	flagName := strings.ReplaceAll(name, "_", "-")
	f := o.fs.Lookup(flagName)
	if name == "" || strings.HasPrefix(name, "-") || f == nil || flagName == "o" {
		msg := fmt.Sprintf("unknown mount option %q", opt)
		if s := closest(o.fs, flagName); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", strings.ReplaceAll(s, "-", "_"))
		}
		return errors.New(msg)
	}
	if !hasValue {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			return fmt.Errorf("mount option %s needs a value (%s=...)", name, name)
		}
		value = "true"
	}
	if err := f.Value.Set(value); err != nil {
		return fmt.Errorf("mount option %s: %q is not a value of it: %v", opt, value, err)
	}
	o.set[flagName] = name
	return nil
}

// flagNames are flags as errors name them: --NAME.
var flagNames = regexp.MustCompile(`--[a-z0-9][a-z0-9-]*`)

// named rewords an error about a flag that an option set to name the
// option instead: "mount option cache_size: ..." for "--cache-size: ...".
func (o *mountOptions) named(err error) error {
	if err == nil || len(o.set) == 0 {
		return err
	}
	msg := flagNames.ReplaceAllStringFunc(err.Error(), func(flag string) string {
		if opt, ok := o.set[flag[2:]]; ok {
			return "mount option " + opt
		}
		return flag
	})
	return errors.New(msg)
}

// fail prints an error, naming the options that set the flags it names,
// and returns exit code 1.
func (o *mountOptions) fail(stderr io.Writer, err error) int {
	return fail(stderr, o.named(err))
}
