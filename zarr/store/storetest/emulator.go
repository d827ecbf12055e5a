package storetest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/zarrtest/missing"
)

// Emulator is a server program the tests of a remote store run on
// 127.0.0.1 (versitygw, fake-gcs-server, Azurite): how to find it and how
// to start it.
type Emulator struct {
	// Name is the program, looked up in $PATH ("versitygw").
	Name string
	// EnvVar names a variable that gives the program's path instead.
	EnvVar string
	// GoBin: the program may be in GOPATH/bin too, where go install puts it.
	GoBin bool
	// Path is one more place the program may be.
	Path string
	// Install says how to install the program, for the error when it is
	// missing.
	Install string
	// Args are the program's arguments to listen on addr (127.0.0.1:PORT)
	// with its data in dir.
	Args func(addr, dir string) []string
	// InDir runs the program in dir, for programs that write files into
	// their working directory.
	InDir bool
	// Env is added to the program's environment.
	Env []string
	// Wait bounds how long the program may take to listen (default 10s).
	Wait time.Duration
}

// Binary finds the program: $EnvVar, $PATH, GOPATH/bin, then Path.
func (e Emulator) Binary() (string, error) {
	if p := os.Getenv(e.EnvVar); e.EnvVar != "" && p != "" {
		return p, nil
	}
	if p, err := exec.LookPath(e.Name); err == nil {
		return p, nil
	}
	var places []string
	if e.GoBin {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			places = append(places, filepath.Join(strings.TrimSpace(string(out)), "bin", e.Name))
		}
	}
	if e.Path != "" {
		places = append(places, e.Path)
	}
	for _, p := range places {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: %s, or set %s", e.Name, e.Install, e.EnvVar)
}

// Start starts the program for the test, with its data in a temporary
// directory, and stops it in cleanup, showing its output when the test
// failed. It returns the address the program listens on and its
// directory. Without the program the test is skipped, or fails when CI is
// set.
func (e Emulator) Start(t testing.TB) (addr, dir string) {
	t.Helper()
	if _, err := e.Binary(); err != nil {
		missing.Report(t, "%v", err)
	}
	logPath := filepath.Join(t.TempDir(), e.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	dir = t.TempDir()
	addr, stop, err := e.StartProcess(dir, logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output:\n%s", e.Name, b)
		}
	})
	return addr, dir
}

// StartProcess starts the program on a free port of 127.0.0.1 with its
// data in dir (made if missing) and its output to log, waits until it
// listens, and returns its address with the function that stops it.
func (e Emulator) StartProcess(dir string, log io.Writer) (addr string, stop func(), err error) {
	bin, err := e.Binary()
	if err != nil {
		return "", nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, e.Args(addr, dir)...)
	if e.InDir {
		cmd.Dir = dir
	}
	cmd.Env = append(os.Environ(), e.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	// The program and what it starts (node, a shell's children) are one
	// process group, stopped together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	wait := e.Wait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	for deadline := time.Now().Add(wait); ; {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return addr, stop, nil
		}
		select {
		case err := <-exited:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it started
			return "", nil, fmt.Errorf("%s exited: %v", e.Name, err)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("%s does not listen on %s after %s", e.Name, addr, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
