package integration_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestCorruptShards damages three shards of a generated store before
// mounting it: a flipped byte in a checksummed index, a flipped byte in an
// inner chunk that ends with a crc32c, and a shard cut short under its
// index (at the start, without checksum). The damaged chunks' files give
// EIO in both views (the whole shard when its index cannot be trusted),
// every other chunk of the store reads its exact bytes, and the log names
// each damaged shard in exactly one line, with the reason.
func TestCorruptShards(t *testing.T) {
	dir := t.TempDir()
	zarrtest.WriteV3Store(t, dir)
	h := scanStore(t, dir)
	arrays := map[string]*storedArray{}
	for _, sa := range h.arrays {
		arrays[sa.path()] = sa
	}
	rewrite := func(shard string, change func([]byte) []byte) {
		path := filepath.Join(dir, filepath.FromSlash(shard))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, change(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// damage is what was done to a shard: the log line's reason, and
	// either one broken chunk or (whole) all of them.
	type damage struct {
		reason string
		whole  bool
		chunk  storedChunk
	}
	damaged := map[string]damage{} // by shard key

	sa := arrays["uint16_zstd_end"]
	c := sa.chunks[len(sa.chunks)/2]
	rewrite(c.shard, func(b []byte) []byte {
		b[len(b)-sa.node.Array.Sharding().IndexSize()] ^= 0xff
		return b
	})
	damaged[c.shard] = damage{reason: "unreadable shard index", whole: true}

	sa = arrays["float32_bigendian"]
	c = sa.chunks[len(sa.chunks)/2]
	rewrite(c.shard, func(b []byte) []byte {
		b[c.off] ^= 0xff
		return b
	})
	damaged[c.shard] = damage{reason: "checksum mismatch", chunk: c}

	sa = arrays["int32_gzip_start_nocrc"]
	c = sa.chunks[len(sa.chunks)/2]
	rewrite(c.shard, func(b []byte) []byte { return b[:len(b)-1] })
	damaged[c.shard] = damage{reason: "beyond the shard", whole: true}

	m := mount(t, dir, "--ro")
	var lost, kept int
	for pass := range 2 { // twice, to see each problem logged once
		for _, sa := range h.arrays {
			for _, c := range sa.chunks {
				d, hit := damaged[c.shard]
				broken := hit && (d.whole || d.chunk.off == c.off)
				for _, v := range views {
					path := filepath.Join(m.Dir, v, sa.path(), sa.keys(v, ".").Key(c.coords))
					got, err := os.ReadFile(path)
					switch {
					case broken:
						if !errors.Is(err, syscall.EIO) {
							t.Errorf("read %s: %v, want EIO", path, err)
						}
						if _, err := os.Stat(path); d.whole && !errors.Is(err, syscall.EIO) {
							t.Errorf("stat %s: %v, want EIO", path, err)
						}
						lost += 1 - pass
					case err != nil:
						t.Errorf("read %s: %v", path, err)
					case v == "v3" && !bytes.Equal(got, h.shardBytes(t, c)):
						t.Errorf("read %s: wrong bytes", path)
					default:
						kept += 1 - pass
					}
				}
			}
			if _, err := os.ReadDir(filepath.Join(m.Dir, "v2", sa.path())); err != nil {
				t.Errorf("listing %s: %v", sa.path(), err)
			}
		}
	}
	t.Logf("%d reads of damaged chunks gave EIO, %d of the others their bytes", lost, kept)
	for shard, d := range damaged {
		lines := regexp.MustCompile(`(?m)^.* key="?`+regexp.QuoteMeta(shard)+`"?( .*)?$`).FindAllString(m.Log(), -1)
		if len(lines) != 1 || !regexp.MustCompile(regexp.QuoteMeta(d.reason)).MatchString(lines[0]) {
			t.Errorf("%s: the log has %d lines naming it, want one saying %q:\n%s", shard, len(lines), d.reason, m.Log())
			continue
		}
		t.Logf("log: %s", lines[0])
	}
}
