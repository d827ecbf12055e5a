package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/zarrfs/zarrfs/zarr"
)

// progressInterval is how often a command whose stderr is not a terminal
// (a log, a pipe, cron) prints a line on its progress.
const progressInterval = 5 * time.Second

// progress reports how far a long command (check, compact, info,
// recover, consolidate) is, on stderr: on a terminal a bar (done/total,
// rate, ETA, bytes), otherwise a line every progressInterval. Commands
// print their summary themselves, from its counts (String).
type progress struct {
	command, unit string
	start         time.Time
	total         atomic.Int64 // 0 until known
	done          atomic.Int64
	bytes         atomic.Int64

	out  io.Writer
	bar  *progressbar.ProgressBar // on a terminal
	mu   sync.Mutex               // orders the bar's updates
	stop chan struct{}
	wg   sync.WaitGroup
}

// startProgress starts reporting the progress of command, which counts
// its work in unit ("shards"), on stderr.
func startProgress(command, unit string, stderr io.Writer) *progress {
	p := &progress{command: command, unit: unit, start: time.Now(), out: stderr, stop: make(chan struct{})}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("zarrfs "+command),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString(unit),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(20),
		)
		p.bar.RenderBlank()
		return p
	}
	p.wg.Go(func() {
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
				fmt.Fprintf(p.out, "zarrfs %s: %s\n", p.command, p.line())
			}
		}
	})
	return p
}

// setTotal sets how many units the command has to do.
func (p *progress) setTotal(n int64) {
	p.total.Store(n)
	if p.bar != nil {
		p.mu.Lock()
		p.bar.ChangeMax64(n)
		p.mu.Unlock()
	}
}

// add counts n units done, of bytes bytes.
func (p *progress) add(n int, bytes int64) {
	p.done.Add(int64(n))
	b := p.bytes.Add(bytes)
	if p.bar != nil {
		p.mu.Lock()
		p.bar.Describe(fmt.Sprintf("zarrfs %s %s", p.command, humanBytes(b)))
		p.bar.Add(n)
		p.mu.Unlock()
	}
}

// end stops reporting (and clears the bar), before the summary.
func (p *progress) end() {
	close(p.stop)
	p.wg.Wait()
	if p.bar != nil {
		p.mu.Lock()
		p.bar.Exit()
		p.bar.Clear()
		p.mu.Unlock()
	}
}

// line is the state of the work: 120/400 shards, 1.2 GiB, 95 MiB/s, ETA 12s.
func (p *progress) line() string {
	done, total, elapsed := p.done.Load(), p.total.Load(), time.Since(p.start)
	s := fmt.Sprintf("%d", done)
	if total > 0 {
		s += fmt.Sprintf("/%d", total)
	}
	s += " " + p.unit + ", " + p.rate(elapsed)
	if total > done && done > 0 {
		eta := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

// String sums the work up: 1.2 GiB in 11s, 110 MiB/s, or, when it
// counts no bytes, in 11s.
func (p *progress) String() string {
	elapsed := time.Since(p.start)
	in := "in " + elapsed.Round(time.Millisecond).String()
	if p.bytes.Load() == 0 {
		return in
	}
	b := p.bytes.Load()
	return fmt.Sprintf("%s %s, %s/s", humanBytes(b), in, humanBytes(int64(float64(b)/max(elapsed.Seconds(), 1e-3))))
}

// rate is the bytes done and their rate (1.2 GiB, 95 MiB/s), or the
// units' when it counts no bytes (30 shards/s).
func (p *progress) rate(elapsed time.Duration) string {
	secs := max(elapsed.Seconds(), 1e-3)
	if b := p.bytes.Load(); b > 0 {
		return humanBytes(b) + ", " + humanBytes(int64(float64(b)/secs)) + "/s"
	}
	return fmt.Sprintf("%.0f %s/s", float64(p.done.Load())/secs, p.unit)
}

// countObjects counts the stored chunks (shards) of the arrays of nodes,
// by listing them (on a store that cannot list, every object of the grid
// counts), for progress's total. sharded leaves unsharded arrays out.
func countObjects(ctx context.Context, nodes []*zarr.Node, sharded bool) (int64, error) {
	var n int64
	for _, node := range nodes {
		a := node.Array
		if a == nil || sharded && a.Sharding() == nil {
			continue
		}
		for _, err := range a.ChunkCandidates(ctx) {
			if err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
