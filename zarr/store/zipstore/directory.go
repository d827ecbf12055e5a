package zipstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store"
)

// The central directory is read here rather than by archive/zip, whose
// Reader keeps every header (about 300 bytes an entry, with its name,
// extra fields and comment, in separate allocations): a store keeps what
// it reads values with, about 60 bytes an entry besides its name, and
// the names in one string.

// Bounds on the central directory, checked before it is read: a zip
// claiming more is refused, not indexed.
const (
	// MaxEntries bounds the members of a zip (twice the keys of an array
	// of 1,000,000 unsharded chunks).
	MaxEntries = 1 << 21
	// maxDirectory bounds the central directory's size, and so the
	// memory of the names it holds.
	maxDirectory = 256 << 20
)

// Sizes and signatures of the zip format (APPNOTE.TXT 4.3).
const (
	endLen           = 22 // end of central directory record, without comment
	end64LocatorLen  = 20
	end64Len         = 56
	headerLen        = 46 // central directory file header, without name, extra, comment
	localHeaderLen   = 30
	endSignature     = 0x06054b50
	end64LocSig      = 0x07064b50
	end64Signature   = 0x06064b50
	headerSignature  = 0x02014b50
	localSignature   = 0x04034b50
	zip64ExtraID     = 0x0001
	flagEncrypted    = 0x1
	methodStored     = 0
	methodDeflated   = 8
	maxUint16        = 0xffff
	maxUint32        = 0xffffffff
	directoryReadBuf = 1 << 20
)

// member is a file of the zip: where its local header is, its sizes and
// checksum as the central directory gives them, and how it is stored.
type member struct {
	key     string // a substring of the store's names
	header  int64  // offset of the local file header
	csize   int64  // bytes in the zip
	usize   int64  // bytes of content
	crc     uint32
	dosTime uint32 // date << 16 | time
	method  uint16
	flags   uint16
	order   uint32 // its place in the central directory, for duplicates
}

// modTime is the member's modification time (MS-DOS date and time).
func (m *member) modTime() time.Time {
	date, t := uint16(m.dosTime>>16), uint16(m.dosTime)
	return time.Date(int(date>>9+1980), time.Month(date>>5&0xf), int(date&0x1f),
		int(t>>11), int(t>>5&0x3f), int(t&0x1f*2), 0, time.UTC)
}

// directoryEnd is what the end of central directory records say.
type directoryEnd struct {
	entries        uint64
	size, offset   uint64
	recordOffset   int64 // of the (zip64) end record
	baseOffset     int64 // of the zip in the file (data prepended, as by self-extractors)
	thisDisk, disk uint32
}

// readDirectoryEnd finds the end of central directory record in the last
// 64 KiB of the file (its comment is at most that long) and reads it, and
// the zip64 record it points to when counts or offsets overflow.
func readDirectoryEnd(r io.ReaderAt, size int64) (*directoryEnd, error) {
	n := min(size, endLen+maxUint16)
	if n < endLen {
		return nil, errors.New("too short for a zip file")
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-n); err != nil && err != io.EOF {
		return nil, err
	}
	p := -1
	for i := len(buf) - endLen; i >= 0; i-- {
		if le32(buf[i:]) == endSignature && i+endLen+int(le16(buf[i+20:])) <= len(buf) {
			p = i
			break
		}
	}
	if p < 0 {
		return nil, errors.New("no end of central directory record")
	}
	b := buf[p:]
	d := &directoryEnd{
		thisDisk: uint32(le16(b[4:])), disk: uint32(le16(b[6:])),
		entries: uint64(le16(b[10:])), size: uint64(le32(b[12:])), offset: uint64(le32(b[16:])),
		recordOffset: size - n + int64(p),
	}
	if d.entries == maxUint16 || d.size == maxUint32 || d.offset == maxUint32 {
		if err := d.readZip64(r); err != nil {
			return nil, err
		}
	}
	if d.thisDisk != 0 || d.disk != 0 {
		return nil, errors.New("a zip split over several disks")
	}
	if d.size > uint64(d.recordOffset) || d.offset > uint64(d.recordOffset) {
		return nil, fmt.Errorf("a central directory of %d bytes at %d, past its end record at %d", d.size, d.offset, d.recordOffset)
	}
	d.baseOffset = d.recordOffset - int64(d.size) - int64(d.offset)
	if d.baseOffset < 0 {
		return nil, fmt.Errorf("a central directory of %d bytes at %d overlaps its end record at %d", d.size, d.offset, d.recordOffset)
	}
	if d.baseOffset > 0 {
		// Some writers get the offset of the directory right and its
		// size wrong: a header found at the offset says so.
		var sig [4]byte
		if _, err := r.ReadAt(sig[:], int64(d.offset)); err == nil && le32(sig[:]) == headerSignature {
			d.baseOffset = 0
		}
	}
	return d, nil
}

// readZip64 reads the zip64 end of central directory record that the
// locator before the end record points to.
func (d *directoryEnd) readZip64(r io.ReaderAt) error {
	at := d.recordOffset - end64LocatorLen
	if at < 0 {
		return nil // no room for a locator: the values are what they say
	}
	var loc [end64LocatorLen]byte
	if _, err := r.ReadAt(loc[:], at); err != nil {
		return err
	}
	if le32(loc[:]) != end64LocSig {
		return nil
	}
	off := le64(loc[8:])
	if le32(loc[4:]) != 0 || le32(loc[16:]) != 1 || off > uint64(at) || uint64(at)-off < end64Len {
		return errors.New("a zip64 end of central directory locator pointing nowhere")
	}
	var rec [end64Len]byte
	if _, err := r.ReadAt(rec[:], int64(off)); err != nil {
		return err
	}
	if le32(rec[:]) != end64Signature {
		return errors.New("no zip64 end of central directory record where its locator says")
	}
	d.thisDisk, d.disk = le32(rec[16:]), le32(rec[20:])
	d.entries, d.size, d.offset = le64(rec[32:]), le64(rec[40:]), le64(rec[48:])
	d.recordOffset = int64(off)
	return nil
}

// readDirectory reads the central directory d describes and returns its
// members sorted by key (of names that are keys: directories and names
// leaving the store are left out; of a name given twice, the later
// member), and the names they are substrings of. It checks ctx as it
// goes: a zip of millions of entries takes a while.
func readDirectory(ctx context.Context, r io.ReaderAt, d *directoryEnd) ([]member, error) {
	if d.entries > MaxEntries {
		return nil, fmt.Errorf("%d entries, more than the %d a zip store holds", d.entries, MaxEntries)
	}
	if d.size > maxDirectory {
		return nil, fmt.Errorf("a central directory of %d bytes, more than the %d a zip store reads", d.size, maxDirectory)
	}
	if d.entries*headerLen > d.size {
		return nil, fmt.Errorf("%d entries cannot fit in a central directory of %d bytes", d.entries, d.size)
	}
	in := bufio.NewReaderSize(io.NewSectionReader(r, d.baseOffset+int64(d.offset), int64(d.size)), directoryReadBuf)
	members := make([]member, 0, d.entries)
	var names strings.Builder
	names.Grow(int(min(d.size-d.entries*headerLen, d.entries*128))) // most names are short
	type span struct{ start, end int }
	spans := make([]span, 0, d.entries)
	var fixed [headerLen]byte
	var extra []byte
	for i := range d.entries {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if _, err := io.ReadFull(in, fixed[:]); err != nil {
			return nil, fmt.Errorf("central directory entry %d: %w", i, err)
		}
		b := fixed[:]
		if le32(b) != headerSignature {
			return nil, fmt.Errorf("central directory entry %d: no header signature", i)
		}
		m := member{
			flags: le16(b[8:]), method: le16(b[10:]), dosTime: uint32(le16(b[14:]))<<16 | uint32(le16(b[12:])),
			crc: le32(b[16:]), csize: int64(le32(b[20:])), usize: int64(le32(b[24:])),
			header: int64(le32(b[42:])), order: uint32(i),
		}
		nameLen, extraLen, commentLen := int(le16(b[28:])), int(le16(b[30:])), int(le16(b[32:]))
		start := names.Len()
		if _, err := io.CopyN(&names, in, int64(nameLen)); err != nil {
			return nil, fmt.Errorf("central directory entry %d: %w", i, err)
		}
		extra = slices.Grow(extra[:0], extraLen)[:extraLen]
		if _, err := io.ReadFull(in, extra); err != nil {
			return nil, fmt.Errorf("central directory entry %d: %w", i, err)
		}
		if _, err := in.Discard(commentLen); err != nil {
			return nil, fmt.Errorf("central directory entry %d: %w", i, err)
		}
		if err := m.zip64(extra); err != nil {
			return nil, fmt.Errorf("central directory entry %d: %w", i, err)
		}
		m.header += d.baseOffset
		members = append(members, m)
		spans = append(spans, span{start, names.Len()})
	}
	all := names.String()
	kept := members[:0]
	for i, m := range members {
		m.key = all[spans[i].start:spans[i].end]
		if strings.HasSuffix(m.key, "/") || store.ValidateKey(m.key) != nil {
			continue // directories, and names that are no key (absolute, "..")
		}
		kept = append(kept, m)
	}
	slices.SortFunc(kept, func(a, b member) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(b.order) - int(a.order) // the later first
	})
	kept = slices.CompactFunc(kept, func(a, b member) bool { return a.key == b.key })
	return slices.Clip(kept), nil
}

// zip64 reads the sizes and offset that overflow the header's fields
// from the zip64 extra field, in the order the format gives them.
func (m *member) zip64(extra []byte) error {
	needU, needC, needOff := m.usize == maxUint32, m.csize == maxUint32, m.header == maxUint32
	for len(extra) >= 4 && (needU || needC || needOff) {
		tag, n := le16(extra), int(le16(extra[2:]))
		extra = extra[4:]
		if n > len(extra) {
			break
		}
		field := extra[:n]
		extra = extra[n:]
		if tag != zip64ExtraID {
			continue
		}
		for _, v := range []struct {
			need *bool
			to   *int64
		}{{&needU, &m.usize}, {&needC, &m.csize}, {&needOff, &m.header}} {
			if !*v.need {
				continue
			}
			if len(field) < 8 {
				return errors.New("a zip64 extra field too short for the sizes it replaces")
			}
			u := le64(field)
			if u > 1<<63-1 {
				return errors.New("a size or offset past 2^63 in a zip64 extra field")
			}
			*v.to, *v.need, field = int64(u), false, field[8:]
		}
	}
	return nil
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
