package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The chart: one line per row of the table, its name on the left and, on
// a log axis of ratios centred on 1x (as fast as the baseline), a bar from
// 1x to the ratio, green where the target is met, red where it is missed,
// blue for the floors (what no file system can beat) and grey for rows
// without a target; a black tick marks the target.
const (
	chartWidth  = 1400
	labelWidth  = 700 // 100 characters of the 7x13 font
	lineHeight  = 18
	chartTop    = 3 * lineHeight // title, legend, axis labels
	chartBottom = lineHeight
	axisLeft    = labelWidth + 10
	axisRight   = chartWidth - 110 // room for the value after a bar
	minRatio    = 1.0 / 32
	maxRatio    = 32.0
)

var (
	colorPass  = color.RGBA{0x2e, 0x9d, 0x3a, 0xff}
	colorMiss  = color.RGBA{0xd6, 0x2d, 0x20, 0xff}
	colorFloor = color.RGBA{0x3b, 0x6f, 0xc4, 0xff}
	colorNone  = color.RGBA{0xa0, 0xa0, 0xa0, 0xff}
	colorGrid  = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	colorText  = color.Black
)

// chartHeight is the height of the chart of rows.
func chartHeight(rows []row) int { return chartTop + len(rows)*lineHeight + chartBottom }

// ratioX is where a ratio lies on the axis.
func ratioX(r float64) int {
	r = min(max(r, minRatio), maxRatio)
	f := (math.Log(r) - math.Log(minRatio)) / (math.Log(maxRatio) - math.Log(minRatio))
	return axisLeft + int(f*float64(axisRight-axisLeft))
}

// rowColor is the colour of a row's bar.
func rowColor(r row) color.RGBA {
	_, pass := r.result()
	switch {
	case pass != nil && *pass:
		return colorPass
	case pass != nil:
		return colorMiss
	case strings.HasPrefix(r.name, "floor"):
		return colorFloor
	}
	return colorNone
}

// drawChart draws the rows of the table under title.
func drawChart(rows []row, title string) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, chartHeight(rows)))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	text := func(x, y int, s string, c color.Color) int {
		d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
		return d.Dot.X.Round()
	}
	fill := func(x0, y0, x1, y1 int, c color.Color) {
		draw.Draw(img, image.Rect(min(x0, x1), y0, max(x0, x1), y1), image.NewUniform(c), image.Point{}, draw.Src)
	}
	text(4, lineHeight-5, title, colorText)
	x := 4
	for _, l := range []struct {
		c    color.RGBA
		name string
	}{{colorPass, "PASS"}, {colorMiss, "MISS"}, {colorFloor, "floor"}, {colorNone, "no target"}} {
		fill(x, 2*lineHeight-13, x+12, 2*lineHeight-3, l.c)
		x = text(x+16, 2*lineHeight-4, l.name, colorText) + 16
	}
	fill(x, 2*lineHeight-13, x+2, 2*lineHeight-3, colorText)
	text(x+6, 2*lineHeight-4, "target; ratio = baseline time / zarrfs time, log scale", colorText)
	bottom := chartTop + len(rows)*lineHeight
	for r := minRatio; r <= maxRatio; r *= 2 {
		gx := ratioX(r)
		c := colorGrid
		if r == 1 {
			c = color.RGBA{0x60, 0x60, 0x60, 0xff}
		}
		fill(gx, chartTop, gx+1, bottom, c)
		label := fmt.Sprintf("%gx", r)
		if r < 1 {
			label = fmt.Sprintf("1/%gx", 1/r)
		}
		text(gx-len(label)*7/2, chartTop-4, label, colorText)
	}
	for i, r := range rows {
		top := chartTop + i*lineHeight
		base := top + lineHeight - 5
		if r.section != "" {
			text(4, base, r.section, colorText)
			continue
		}
		name := "  " + r.name
		if len(name) > labelWidth/7 {
			name = name[:labelWidth/7-3] + "..."
		}
		text(4, base, name, colorText)
		target, pass := r.result()
		value := ""
		if r.ratio > 0 {
			fill(ratioX(1), top+3, ratioX(r.ratio), top+lineHeight-3, rowColor(r))
			value = fmt.Sprintf("%.2fx", r.ratio)
		} else if pass != nil {
			// A target on a rate or a check, not a ratio: a mark, and
			// the value in words.
			fill(ratioX(1)-4, top+3, ratioX(1)+4, top+lineHeight-3, rowColor(r))
			value = r.zarrfs + " " + target
		}
		if r.atLeast > 0 {
			tx := ratioX(r.atLeast)
			fill(tx-1, top+1, tx+1, top+lineHeight-1, colorText)
		}
		if value != "" {
			text(max(ratioX(r.ratio), ratioX(1))+6, base, value, colorText)
		}
	}
	return img
}

// writeChart writes the chart of rows to path as a PNG.
func writeChart(path string, rows []row, title string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, drawChart(rows, title)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
