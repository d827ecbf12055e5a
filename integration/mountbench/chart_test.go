package main

import (
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestChart draws a small table and reads the PNG back: its size follows
// the rows, each bar runs from 1x to its ratio in the colour of its
// result, the targets are marked, and the names are written.
func TestChart(t *testing.T) {
	pass, fail := true, false
	rows := []row{
		{section: "1. reads"},
		{name: "every chunk file, warm", ratio: 2, atLeast: 1},
		{name: "every chunk file, cold", ratio: 0.5, atLeast: 0.8},
		{name: "floor: bindfs over the bytes served", ratio: 0.9},
		{name: "listing of 100k chunks", zarrfs: "250k /s", minRate: 1000, rateValue: 250000},
		{name: "peak RSS", zarrfs: "300 MiB", check: "<= 128 MiB", pass: &fail},
		{name: "a check that passed", check: "ok", pass: &pass},
	}
	path := filepath.Join(t.TempDir(), "bench.png")
	if err := writeChart(path, rows, "test table"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is no PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != chartWidth || b.Dy() != chartTop+len(rows)*lineHeight+chartBottom {
		t.Fatalf("chart of %d rows is %v, want %dx%d", len(rows), b, chartWidth, chartTop+len(rows)*lineHeight+chartBottom)
	}
	mid := func(i int) int { return chartTop + i*lineHeight + lineHeight/2 }
	same := func(c color.Color, want color.RGBA) bool {
		r, g, b, a := c.RGBA()
		wr, wg, wb, wa := want.RGBA()
		return r == wr && g == wg && b == wb && a == wa
	}
	for _, c := range []struct {
		what   string
		x, row int
		want   color.RGBA
	}{
		{"the PASS bar", (ratioX(1) + ratioX(2)) / 2, 1, colorPass},
		{"the MISS bar", (ratioX(0.5) + ratioX(0.6)) / 2, 2, colorMiss},
		{"the MISS bar's target", ratioX(0.8), 2, color.RGBA{0, 0, 0, 0xff}},
		{"the floor's bar", (ratioX(0.9) + ratioX(1)) / 2, 3, colorFloor},
		{"the rate target met", ratioX(1) - 3, 4, colorPass},
		{"the check missed", ratioX(1) + 3, 5, colorMiss},
		{"the check passed", ratioX(1) - 3, 6, colorPass},
		{"white beyond the PASS bar", ratioX(2) + 2 + 60, 1, color.RGBA{0xff, 0xff, 0xff, 0xff}},
	} {
		if got := img.At(c.x, mid(c.row)); !same(got, c.want) {
			t.Errorf("%s at (%d, %d): %v, want %v", c.what, c.x, mid(c.row), got, c.want)
		}
	}
	// Every row's line has text at its left: the name.
	for i := range rows {
		dark := 0
		for x := 0; x < 100; x++ {
			for y := chartTop + i*lineHeight; y < chartTop+(i+1)*lineHeight; y++ {
				if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
					dark++
				}
			}
		}
		if dark == 0 {
			t.Errorf("row %d (%q) has no text", i, rows[i].name+rows[i].section)
		}
	}
}
