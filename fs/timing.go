package fs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// timedFS passes every request to the file system and tells observe its
// opcode (as the FUSE protocol names it: LOOKUP, READ, ...) and how long
// the file system took to answer it (Options.OnRequest).
type timedFS struct {
	fuse.RawFileSystem
	observe func(op string, d time.Duration)
}

var _ fuse.RawFileSystem = (*timedFS)(nil)

func (t *timedFS) since(op string, start time.Time) { t.observe(op, time.Since(start)) }

func (t *timedFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	defer t.since("LOOKUP", time.Now())
	return t.RawFileSystem.Lookup(cancel, header, name, out)
}

func (t *timedFS) Forget(nodeid, nlookup uint64) {
	defer t.since("FORGET", time.Now())
	t.RawFileSystem.Forget(nodeid, nlookup)
}

func (t *timedFS) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.since("GETATTR", time.Now())
	return t.RawFileSystem.GetAttr(cancel, input, out)
}

func (t *timedFS) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.since("SETATTR", time.Now())
	return t.RawFileSystem.SetAttr(cancel, input, out)
}

func (t *timedFS) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.since("MKNOD", time.Now())
	return t.RawFileSystem.Mknod(cancel, input, name, out)
}

func (t *timedFS) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.since("MKDIR", time.Now())
	return t.RawFileSystem.Mkdir(cancel, input, name, out)
}

func (t *timedFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	defer t.since("UNLINK", time.Now())
	return t.RawFileSystem.Unlink(cancel, header, name)
}

func (t *timedFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	defer t.since("RMDIR", time.Now())
	return t.RawFileSystem.Rmdir(cancel, header, name)
}

func (t *timedFS) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) fuse.Status {
	defer t.since("RENAME", time.Now())
	return t.RawFileSystem.Rename(cancel, input, oldName, newName)
}

func (t *timedFS) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) fuse.Status {
	defer t.since("LINK", time.Now())
	return t.RawFileSystem.Link(cancel, input, filename, out)
}

func (t *timedFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	defer t.since("SYMLINK", time.Now())
	return t.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
}

func (t *timedFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	defer t.since("READLINK", time.Now())
	return t.RawFileSystem.Readlink(cancel, header)
}

func (t *timedFS) Access(cancel <-chan struct{}, input *fuse.AccessIn) fuse.Status {
	defer t.since("ACCESS", time.Now())
	return t.RawFileSystem.Access(cancel, input)
}

func (t *timedFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	defer t.since("GETXATTR", time.Now())
	return t.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (t *timedFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	defer t.since("LISTXATTR", time.Now())
	return t.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (t *timedFS) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	defer t.since("SETXATTR", time.Now())
	return t.RawFileSystem.SetXAttr(cancel, input, attr, data)
}

func (t *timedFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	defer t.since("REMOVEXATTR", time.Now())
	return t.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (t *timedFS) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer t.since("CREATE", time.Now())
	return t.RawFileSystem.Create(cancel, input, name, out)
}

func (t *timedFS) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	defer t.since("TMPFILE", time.Now())
	return t.RawFileSystem.Tmpfile(cancel, input, out)
}

func (t *timedFS) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.since("OPEN", time.Now())
	return t.RawFileSystem.Open(cancel, input, out)
}

func (t *timedFS) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	defer t.since("READ", time.Now())
	return t.RawFileSystem.Read(cancel, input, buf)
}

func (t *timedFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	defer t.since("LSEEK", time.Now())
	return t.RawFileSystem.Lseek(cancel, in, out)
}

func (t *timedFS) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	defer t.since("GETLK", time.Now())
	return t.RawFileSystem.GetLk(cancel, input, out)
}

func (t *timedFS) SetLk(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	defer t.since("SETLK", time.Now())
	return t.RawFileSystem.SetLk(cancel, input)
}

func (t *timedFS) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	defer t.since("SETLKW", time.Now())
	return t.RawFileSystem.SetLkw(cancel, input)
}

func (t *timedFS) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	defer t.since("RELEASE", time.Now())
	t.RawFileSystem.Release(cancel, input)
}

func (t *timedFS) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer t.since("WRITE", time.Now())
	return t.RawFileSystem.Write(cancel, input, data)
}

func (t *timedFS) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer t.since("WRITE", time.Now())
	return t.RawFileSystem.Writev(cancel, input, data)
}

func (t *timedFS) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	defer t.since("COPY_FILE_RANGE", time.Now())
	return t.RawFileSystem.CopyFileRange(cancel, input)
}

func (t *timedFS) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) fuse.Status {
	defer t.since("IOCTL", time.Now())
	return t.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
}

func (t *timedFS) Flush(cancel <-chan struct{}, input *fuse.FlushIn) fuse.Status {
	defer t.since("FLUSH", time.Now())
	return t.RawFileSystem.Flush(cancel, input)
}

func (t *timedFS) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	defer t.since("FSYNC", time.Now())
	return t.RawFileSystem.Fsync(cancel, input)
}

func (t *timedFS) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) fuse.Status {
	defer t.since("FALLOCATE", time.Now())
	return t.RawFileSystem.Fallocate(cancel, input)
}

func (t *timedFS) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.since("OPENDIR", time.Now())
	return t.RawFileSystem.OpenDir(cancel, input, out)
}

func (t *timedFS) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.since("READDIR", time.Now())
	return t.RawFileSystem.ReadDir(cancel, input, out)
}

func (t *timedFS) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.since("READDIRPLUS", time.Now())
	return t.RawFileSystem.ReadDirPlus(cancel, input, out)
}

func (t *timedFS) ReleaseDir(input *fuse.ReleaseIn) {
	defer t.since("RELEASEDIR", time.Now())
	t.RawFileSystem.ReleaseDir(input)
}

func (t *timedFS) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	defer t.since("FSYNCDIR", time.Now())
	return t.RawFileSystem.FsyncDir(cancel, input)
}

func (t *timedFS) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	defer t.since("STATFS", time.Now())
	return t.RawFileSystem.StatFs(cancel, input, out)
}

func (t *timedFS) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	defer t.since("STATX", time.Now())
	return t.RawFileSystem.Statx(cancel, input, out)
}
