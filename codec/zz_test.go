package codec_test
import ("testing";"time";"encoding/json";"github.com/zarrfs/zarrfs/codec";"github.com/zarrfs/zarrfs/zarr/dtype")
func TestZZ(t *testing.T){
	big := make([]byte, 32<<20)
	for _, name := range []string{`{"name":"gzip","configuration":{"level":1}}`,`{"name":"numcodecs.bz2","configuration":{"level":9}}`,`{"name":"numcodecs.bz2","configuration":{"level":1}}`,`{"name":"zstd","configuration":{"level":1,"checksum":false}}`,`{"name":"numcodecs.lz4"}`,`{"name":"numcodecs.zlib","configuration":{"level":1}}`,`{"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"noshuffle","typesize":1}}`} {
		var m codec.Metadata; json.Unmarshal([]byte(name), &m)
		c, _ := codec.New(m, codec.Spec{Shape: []int{len(big)}, Type: dtype.TypeUint8})
		s := time.Now(); out, _ := c.(codec.BytesToBytes).Encode(big); t.Log(m.Name, time.Since(s), len(out))
	}
}
