package blosc

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/zarrtest/missing"
)

const python = "/usr/bin/python3"

// needNumcodecs skips the test unless Debian's python3 with numcodecs is
// installed; under CI=true it fails instead (missing.Report).
func needNumcodecs(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping c-blosc interop in -short mode")
	}
	if _, err := os.Stat(python); err != nil {
		missing.Report(t, "c-blosc interop: %s not found", python)
	}
	if out, err := exec.Command(python, "-c", "import numcodecs.blosc").CombinedOutput(); err != nil {
		missing.Report(t, "c-blosc interop: numcodecs not importable: %v %s", err, bytes.TrimSpace(out))
	}
}

// TestCBloscDecodesOurFrames compresses a grid of inputs and options plus
// random cases, and checks that c-blosc (numcodecs) decodes every frame to
// the original bytes.
func TestCBloscDecodesOurFrames(t *testing.T) {
	t.Parallel()
	needNumcodecs(t)
	dir := t.TempDir()
	type item struct {
		desc string
		sum  string
	}
	items := map[string]item{}
	add := func(src []byte, o Options) {
		frame, err := Compress(src, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		name := fmt.Sprintf("%05d.blosc", len(items))
		if err := os.WriteFile(filepath.Join(dir, name), frame, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(src)
		items[name] = item{fmt.Sprintf("%+v n=%d", o, len(src)), hex.EncodeToString(sum[:])}
	}

	inputs := []genParams{
		{Kind: "walk", TS: 8, NBytes: 100000, Seed: 1, Amp: 20},
		{Kind: "random", NBytes: 20000, Seed: 2},
		{Kind: "ramp", TS: 8, NBytes: 100003, Step: 7},
		{Kind: "zeros", NBytes: 70000},
		{Kind: "walk", TS: 1, NBytes: 129, Seed: 3, Amp: 1},
	}
	for _, g := range inputs {
		src, err := genInput(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, cname := range allCnames {
			for _, sh := range []Shuffle{NoShuffle, ByteShuffle, BitShuffle} {
				for _, ts := range []int{1, 2, 3, 4, 8, 12, 16, 33} {
					add(src, Options{Compressor: cname, Level: 5, Shuffle: sh, TypeSize: ts})
				}
				for _, level := range []int{1, 2, 3, 4, 6, 7, 8, 9} {
					if g.Kind == "walk" {
						add(src, Options{Compressor: cname, Level: level, Shuffle: sh, TypeSize: 4})
					}
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		add(randomCase(rng, 300000))
	}

	cmd := exec.Command(python, filepath.Join("testdata", "cblosc_decode.py"), dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cblosc_decode.py: %v", err)
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, result, _ := strings.Cut(sc.Text(), " ")
		it, ok := items[name]
		if !ok {
			t.Fatalf("unexpected output line %q", sc.Text())
		}
		seen++
		if result != it.sum {
			t.Errorf("c-blosc on %s (%s): %s", name, it.desc, result)
		}
	}
	if seen != len(items) {
		t.Fatalf("c-blosc reported %d of %d frames", seen, len(items))
	}
	t.Logf("c-blosc decoded all %d frames", seen)
}
