package meta

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

var (
	defaultSlash = KeyEncoding{Name: KeyEncodingDefault, Separator: "/"}
	defaultDot   = KeyEncoding{Name: KeyEncodingDefault, Separator: "."}
	v2Dot        = KeyEncoding{Name: KeyEncodingV2, Separator: "."}
	v2Slash      = KeyEncoding{Name: KeyEncodingV2, Separator: "/"}
)

func TestKeyEncodingKeys(t *testing.T) {
	maxKey := strconv.Itoa(math.MaxInt)
	cases := []struct {
		k      KeyEncoding
		coords []int
		key    string
	}{
		{defaultSlash, []int{1, 23, 45}, "c/1/23/45"},
		{defaultSlash, []int{0}, "c/0"},
		{defaultSlash, []int{}, "c"},
		{defaultDot, []int{1, 0}, "c.1.0"},
		{v2Dot, []int{1, 23, 45}, "1.23.45"},
		{v2Dot, []int{}, "0"},
		{v2Slash, []int{0, 7}, "0/7"},
		{v2Dot, []int{math.MaxInt}, maxKey},
	}
	for _, c := range cases {
		if got := c.k.Key(c.coords); got != c.key {
			t.Errorf("%+v.Key(%v) = %q, want %q", c.k, c.coords, got, c.key)
		}
		got, ok := c.k.Parse(c.key, len(c.coords))
		if !ok || !reflect.DeepEqual(got, c.coords) {
			t.Errorf("%+v.Parse(%q) = %v, %v; want %v", c.k, c.key, got, ok, c.coords)
		}
	}
}

func TestKeyEncodingParseRejects(t *testing.T) {
	overflow := strconv.Itoa(math.MaxInt) + "0"
	cases := []struct {
		k    KeyEncoding
		key  string
		ndim int
	}{
		{defaultSlash, "1/2", 2},     // no "c"
		{defaultSlash, "c/1", 2},     // too few parts
		{defaultSlash, "c/1/2/3", 2}, // too many parts
		{defaultSlash, "c/1/", 2},    // empty part
		{defaultSlash, "c//1", 2},
		{defaultSlash, "c/01/2", 2}, // leading zero
		{defaultSlash, "c/+1/2", 2}, // sign
		{defaultSlash, "c/-1/2", 2},
		{defaultSlash, "c/1.2", 2}, // wrong separator
		{defaultSlash, "c1/2", 2},
		{defaultSlash, "c/1/2 ", 2},
		{defaultSlash, "c/", 0},
		{defaultSlash, "c/0", 0},
		{defaultSlash, "", 0},
		{defaultSlash, "c/" + overflow, 1},
		{defaultSlash, "c/1/x", 2},
		{defaultSlash, "c/1/2", -1},
		{v2Dot, "c.1.2", 2},
		{v2Dot, "1/2", 2},
		{v2Dot, "", 1},
		{v2Dot, "", 0},
		{v2Dot, "00", 1},
		{v2Dot, "1", 0},
		{v2Dot, "1.", 1},
		{v2Dot, "١", 1}, // non-ASCII digit
		{KeyEncoding{Name: KeyEncodingV2}, "1", 1},
	}
	for _, c := range cases {
		if got, ok := c.k.Parse(c.key, c.ndim); ok {
			t.Errorf("%+v.Parse(%q, %d) = %v, want a rejection", c.k, c.key, c.ndim, got)
		}
	}
}

// Parse inverts Key for every encoding and any coordinates.
func TestKeyEncodingParseKeyProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		k := []KeyEncoding{defaultSlash, defaultDot, v2Dot, v2Slash}[rng.IntN(4)]
		coords := make([]int, rng.IntN(6))
		for i := range coords {
			switch rng.IntN(3) {
			case 0:
				coords[i] = rng.IntN(10)
			case 1:
				coords[i] = rng.IntN(1 << 20)
			default:
				coords[i] = rng.IntN(math.MaxInt)
			}
		}
		got, ok := k.Parse(k.Key(coords), len(coords))
		if !ok || !reflect.DeepEqual(got, coords) {
			t.Fatalf("%+v: Parse(Key(%v)) = %v, %v", k, coords, got, ok)
		}
	}
}

// FUSE lookups parse names on hot paths.
func TestKeyEncodingAllocations(t *testing.T) {
	if got := testing.AllocsPerRun(100, func() { defaultSlash.Parse("c/12/345/6789", 3) }); got > 1 {
		t.Errorf("Parse allocates %v times, want at most 1", got)
	}
	if got := testing.AllocsPerRun(100, func() { v2Dot.Parse("12.x", 2) }); got > 1 {
		t.Errorf("failing Parse allocates %v times, want at most 1", got)
	}
	if got := testing.AllocsPerRun(100, func() { _ = defaultSlash.Key([]int{12, 345, 6789}) }); got > 1 {
		t.Errorf("Key allocates %v times, want at most 1", got)
	}
}

func BenchmarkKeyEncodingParse(b *testing.B) {
	for b.Loop() {
		defaultSlash.Parse("c/12/345/6789", 3)
	}
}

func TestParseKeyEncoding(t *testing.T) {
	cases := []struct {
		raw  string
		want KeyEncoding
	}{
		{`{"name": "default"}`, defaultSlash},
		{`"default"`, defaultSlash},
		{`{"name": "default", "configuration": {"separator": "."}}`, defaultDot},
		{`{"name": "v2"}`, v2Dot},
		{`"v2"`, v2Dot},
		{`{"name": "v2", "configuration": {"separator": "/"}}`, v2Slash},
	}
	for _, c := range cases {
		got, err := parseKeyEncoding([]byte(c.raw))
		if err != nil || got != c.want {
			t.Errorf("%s = %+v, %v; want %+v", c.raw, got, err, c.want)
		}
	}
}
