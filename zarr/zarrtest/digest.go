package zarrtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/zarrfs/zarrfs/codec"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/dtype"
)

// DigestArray reads a whole array and returns its Digest.
func DigestArray(ctx context.Context, a *zarr.Array) (string, error) {
	data, err := a.Read(ctx)
	if err != nil {
		return "", err
	}
	return Digest(data), nil
}

// Digest is the oracles' content digest: sha256 of little-endian C-order
// bytes for fixed-size numbers, of the compact JSON list of the values for
// strings and objects.
func Digest(c *codec.Chunk) string {
	var sum [32]byte
	switch c.Type.Kind {
	case dtype.String, dtype.Bytes, dtype.Object, dtype.FixedBytes, dtype.FixedUnicode:
		sum = sha256.Sum256([]byte(jsonValues(c)))
	default:
		sum = sha256.Sum256(c.Data)
	}
	return hex.EncodeToString(sum[:])
}

// jsonValues prints the values as Python's json.dumps(values,
// separators=(",", ":"), ensure_ascii=False) does in the oracle.
func jsonValues(c *codec.Chunk) string {
	var b strings.Builder
	b.WriteByte('[')
	n := len(c.Items)
	if !c.Type.Variable() {
		n = len(c.Data) / c.Type.Size
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		switch c.Type.Kind {
		case dtype.Object:
			b.Write(c.Items[i]) // already the value's JSON
		case dtype.String:
			writePyString(&b, string(c.Items[i]))
		case dtype.Bytes:
			writePyString(&b, strings.ReplaceAll(strings.ToValidUTF8(string(c.Items[i]), "\uFFFD"), "\x00", ""))
		case dtype.FixedBytes:
			v := c.Data[i*c.Type.Size : (i+1)*c.Type.Size]
			writePyString(&b, strings.ReplaceAll(strings.ToValidUTF8(string(v), "\uFFFD"), "\x00", ""))
		case dtype.FixedUnicode:
			v := c.Data[i*c.Type.Size : (i+1)*c.Type.Size]
			var s []rune
			for j := 0; j+4 <= len(v); j += 4 {
				s = append(s, rune(uint32(v[j])|uint32(v[j+1])<<8|uint32(v[j+2])<<16|uint32(v[j+3])<<24))
			}
			writePyString(&b, strings.TrimRight(string(s), "\x00"))
		}
	}
	b.WriteByte(']')
	return b.String()
}

func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				const hexdigits = "0123456789abcdef"
				b.WriteString(`\u00`)
				b.WriteByte(hexdigits[r>>4])
				b.WriteByte(hexdigits[r&15])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
