// Package fuseuring serves a go-fuse file system over FUSE-over-io_uring
// (Linux 6.14+, the fuse module's enable_uring parameter), which go-fuse
// does not speak (hanwen/go-fuse#560): one request queue per CPU, and a
// request and its reply cost no read(2) and write(2) on /dev/fuse and no
// wakeup of a thread on another CPU.
//
// The package only moves bytes. go-fuse's Server mounts and answers the
// kernel's INIT, and keeps serving /dev/fuse, where the kernel still sends
// forgets and interrupts and where notifications go. Every other request
// arrives in an entry of a ring and is handed to the Server's own request
// parser (as a ProtocolServer), which parses it, calls the file system and
// writes the reply back into the entry. Being the Server's, it knows the
// requests under way on the rings: an INTERRUPT the Server reads cancels
// the context of the request it names, as on /dev/fuse.
//
// Two rules come from how the kernel delivers requests and how Go runs:
//   - A thread that submitted an entry's command is locked to its goroutine
//     and lives as long as the entry. The kernel hands a request to an
//     entry by task work on the thread that submitted the entry's command,
//     and cancels the commands of a thread that exits; were that thread
//     lent to other goroutines, it could sit in a wait on this very mount
//     (go-fuse's mount-time LOOKUP) and the request meant for it would
//     never be delivered.
//   - So requests of one file system arrive on different locked threads:
//     the file system must not keep a coroutine (iter.Pull) across requests,
//     since Go resumes one only on the thread that made it.
//
// A queue overlaps its requests, as go-fuse's /dev/fuse readers do: each
// of its entries has a ring and a thread of its own, which waits on that
// ring only and serves the entry's requests itself, so a request costs one
// thread wakeup and one waiting on the store holds its own entry and
// thread, not the queue. A queue keeps depth entries registered, the most
// requests of its CPU under way at once; beyond them the kernel holds
// requests until an entry is given back, so requests are kept small enough
// (maxPayload) for the memory budget to give a queue 23 entries on 2 CPUs.
package fuseuring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The FUSE side of the ABI (include/uapi/linux/fuse.h).
const (
	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: the in or out header, the operation's
	// own header, then struct fuse_uring_ent_in_out.
	headerInOut     = 0
	headerOpIn      = 128
	headerOpInSize  = 128
	headerCommitID  = 256 + 8
	headerPayloadSz = 256 + 16
	headerSize      = 288

	inHeaderSize  = 40
	outHeaderSize = 16
	opWrite       = 16 // FUSE_WRITE: its payload is read in place

	// The memory of every queue's entries together: each entry holds a
	// payload buffer of MaxWrite bytes (at least minPayload, at most
	// maxPayload) and a page of header, touched as requests use it and
	// never given back (a READ reply is written into it). The entries are
	// this budget shared over the queues, but at least minQueueDepth and
	// at most maxQueueDepth a queue: 23 a queue on 2 CPUs (23 MiB), and
	// from 12 CPUs on more than the budget, 4 a queue (2 MiB a CPU).
	transportBufferBytes = 24 << 20
	minPayload           = 128 << 10
	minQueueDepth        = 4
	maxQueueDepth        = 32

	// maxPayload bounds the requests and replies of a mount served over
	// io_uring (its MaxWrite, which also bounds its reads). A queue serves
	// as many requests at once as it has entries, and the kernel puts a
	// request on the queue of its reader's CPU however idle the others
	// are: with 1 MiB requests the budget gave 11 entries a queue on 2
	// CPUs, and 16 readers (node's UV_THREADPOOL_SIZE=16) often had more
	// than 11 requests on one CPU, the rest waiting for a store's round
	// trip. 512 KiB requests give 23 entries a queue, and still take a
	// chunk file of up to 512 KiB in one request; a 1 MiB read-ahead
	// comes as 2 READs, served at once.
	maxPayload = 512 << 10

	// wakeTag marks the completion of the poll on the wake eventfd.
	wakeTag = ^uint64(0)
)

// entryBytes is the memory of one entry of a mount whose writes are at
// most maxWrite bytes.
func entryBytes(maxWrite int) int {
	return entryPayloadOffset + max(min(maxWrite, maxPayload), minPayload)
}

// queueDepth returns the entries each of cpus queues registers.
func queueDepth(cpus, maxWrite int) int {
	return min(max(transportBufferBytes/entryBytes(maxWrite)/cpus, minQueueDepth), maxQueueDepth)
}

// BufferBytes returns the most memory the entries of a mount whose writes
// are at most maxWrite bytes take (outside the Go heap).
func BufferBytes(maxWrite int) int64 {
	cpus, err := possibleCPUs()
	if err != nil {
		return 0
	}
	return int64(cpus * queueDepth(cpus, maxWrite) * entryBytes(maxWrite))
}

// enableParam is the fuse module parameter that lets the kernel offer
// io_uring to daemons.
const enableParam = "/sys/module/fuse/parameters/enable_uring"

// ErrUnavailable is returned when this kernel cannot serve FUSE over
// io_uring.
var ErrUnavailable = errors.New("FUSE over io_uring is not available")

// Available reports why a mount cannot be served over io_uring here, or nil.
// It checks before anything is mounted: a daemon that asks the kernel for
// io_uring and then cannot register its queues leaves the mount hanging.
func Available() error {
	v, err := os.ReadFile(enableParam)
	if err != nil {
		return fmt.Errorf("%w: this kernel has no %s (Linux 6.14+ with CONFIG_FUSE_IO_URING)", ErrUnavailable, enableParam)
	}
	if strings.TrimSpace(string(v)) != "Y" {
		return fmt.Errorf("%w: the fuse module does not offer it; as root: echo Y > %s", ErrUnavailable, enableParam)
	}
	r, err := newRing(1)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r.close()
	return nil
}

// Enable turns on the fuse module's enable_uring parameter (root only). It
// changes nothing for daemons that do not ask for io_uring, so tests and
// benchmarks leave it on: another process may be mounting over io_uring.
func Enable() error {
	if _, err := os.Stat(enableParam); err != nil {
		return fmt.Errorf("%w: this kernel has no %s", ErrUnavailable, enableParam)
	}
	if err := os.WriteFile(enableParam, []byte("Y"), 0); err != nil {
		return fmt.Errorf("enabling FUSE over io_uring: %w", err)
	}
	return nil
}

// Transport is the set of queues serving one mount.
type Transport struct {
	// devFD is the mount's /dev/fuse, which every command names; wakeFD
	// is polled by every ring so that stop can end them.
	devFD, wakeFD int
	done          sync.WaitGroup
	queues        []*queue
	requests      atomic.Uint64
	peakInFlight  atomic.Int32
	queueFull     atomic.Uint64
	// resident is how much of the entries' memory holds pages: an entry's
	// pages are first touched when a request or reply fills them, and few
	// entries ever serve a large one (a reader's READs, about the most
	// requests under way at once). onResident is told when it grows.
	residentMu sync.Mutex
	resident   int64
	onResident func(bytes int64)
}

// residentStep is the granularity at which an entry's resident memory is
// counted: a reply of a few bytes more tells no one.
const residentStep = 64 << 10

// OnResident has f told how many bytes of memory outside the Go heap the
// queues' entries hold, now and whenever that grows (from the threads
// serving requests, one call at a time), up to BufferBytes.
func (t *Transport) OnResident(f func(bytes int64)) {
	t.residentMu.Lock()
	defer t.residentMu.Unlock()
	t.onResident = f
	f(t.resident)
}

// noteResident counts grown more bytes of an entry's memory as resident.
func (t *Transport) noteResident(grown int) {
	t.residentMu.Lock()
	defer t.residentMu.Unlock()
	t.resident += int64(grown)
	if t.onResident != nil {
		t.onResident(t.resident)
	}
}

// Requests returns how many requests the queues have served.
func (t *Transport) Requests() uint64 { return t.requests.Load() }

// notePeak raises the peak to n requests under way on a queue.
func (t *Transport) notePeak(n int32) {
	for peak := t.peakInFlight.Load(); n > peak && !t.peakInFlight.CompareAndSwap(peak, n); peak = t.peakInFlight.Load() {
	}
}

// PeakInFlight returns the most requests one queue has had under way at
// once: above 1, its requests overlapped.
func (t *Transport) PeakInFlight() int { return int(t.peakInFlight.Load()) }

// QueueFull returns how many requests took the last free entry of their
// queue: until one of the queue's requests was answered, the kernel held
// the next ones from its CPU, however idle the other queues were.
func (t *Transport) QueueFull() uint64 { return t.queueFull.Load() }

// Wait returns when every queue has ended, which they do when the mount is
// gone.
func (t *Transport) Wait() { t.done.Wait() }

// mountMu makes the descriptor a mount adds to the process identifiable.
var mountMu sync.Mutex

// Mount mounts fs at dir, as fuse.NewServer followed by Serve and WaitMount
// do, with every request the kernel sends over io_uring served by the
// returned Transport, and requests of at most 512 KiB (maxPayload), whatever
// opts.MaxWrite. Unmount through the server; wait for both.
func Mount(dir string, fs fuse.RawFileSystem, opts fuse.MountOptions) (*fuse.Server, *Transport, error) {
	if err := Available(); err != nil {
		return nil, nil, err
	}
	opts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	opts.MaxWrite = min(opts.MaxWrite, maxPayload) // 0 is go-fuse's default, 128 KiB
	mountMu.Lock()
	before := fuseFDs()
	server, err := fuse.NewServer(fs, dir, &opts)
	if err != nil {
		mountMu.Unlock()
		return nil, nil, err
	}
	devFD, err := newFuseFD(before)
	mountMu.Unlock()
	if err == nil && server.KernelSettings().Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		unix.Close(devFD)
		err = fmt.Errorf("%w: the kernel did not offer it at INIT", ErrUnavailable)
	}
	var t *Transport
	if err == nil {
		if t, err = start(devFD, server, &opts); err != nil {
			unix.Close(devFD)
		}
	}
	if err != nil {
		abort(server, dir)
		return nil, nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		return nil, nil, err
	}
	return server, t, nil
}

// abort ends a mount whose queues could not start: requests would wait for
// them for ever.
func abort(server *fuse.Server, dir string) {
	syscall.Unmount(dir, unix.MNT_DETACH)
	go server.Serve() // returns once the connection is gone
}

// fuseFDs returns the descriptors of the process open on /dev/fuse.
func fuseFDs() map[int]bool {
	fds := map[int]bool{}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			fds[fd] = true
		}
	}
	return fds
}

// newFuseFD duplicates the one /dev/fuse descriptor that is not in before:
// go-fuse keeps the descriptor of its mount to itself.
func newFuseFD(before map[int]bool) (int, error) {
	var found []int
	for fd := range fuseFDs() {
		if !before[fd] {
			found = append(found, fd)
		}
	}
	if len(found) != 1 {
		return -1, fmt.Errorf("finding the mount's /dev/fuse descriptor: %d new ones", len(found))
	}
	return unix.FcntlInt(uintptr(found[0]), unix.F_DUPFD_CLOEXEC, 0)
}

// start sets up one queue per possible CPU (the kernel serves a mount over
// io_uring only once every queue has registered) and returns when every
// entry of every queue has.
func start(devFD int, server *fuse.Server, opts *fuse.MountOptions) (*Transport, error) {
	cpus, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	ps, err := protocolServerOf(server)
	if err != nil {
		return nil, err
	}
	wakeFD, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	t := &Transport{wakeFD: wakeFD, devFD: devFD}
	payloadSize := entryBytes(opts.MaxWrite) - entryPayloadOffset
	depth := queueDepth(cpus, opts.MaxWrite)
	errs := make(chan error, cpus*depth)
	for qid := range cpus {
		q := &queue{t: t, ps: ps, qid: qid, depth: int32(depth)}
		t.queues = append(t.queues, q)
		for range depth {
			e := &entry{q: q}
			q.entries = append(q.entries, e)
			t.done.Add(1)
			go e.run(payloadSize, errs)
		}
	}
	var first error
	for range cpus * depth {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		t.stop()
		unix.Close(wakeFD)
		return nil, first
	}
	go func() {
		t.done.Wait()
		unix.Close(wakeFD)
		unix.Close(devFD)
	}()
	return t, nil
}

// stop makes every queue end now.
func (t *Transport) stop() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(t.wakeFD, one[:])
	t.done.Wait()
}

// protocolServerOf returns the request parser of server as a
// ProtocolServer: go-fuse's Server embeds it first, as ProtocolServer
// does, but offers no way to reach it. Sharing it shares its list of the
// requests under way, which INTERRUPTs are matched against, and the INIT
// the server negotiated. Should a go-fuse version lay the types out
// otherwise, mounting fails here (and the version's test says so) rather
// than misreading memory.
func protocolServerOf(server *fuse.Server) (*fuse.ProtocolServer, error) {
	st, pt := reflect.TypeFor[fuse.Server](), reflect.TypeFor[fuse.ProtocolServer]()
	if st.NumField() == 0 || pt.NumField() != 1 || st.Field(0).Offset != 0 || st.Field(0).Type != pt.Field(0).Type {
		return nil, fmt.Errorf("%w: this go-fuse's Server does not begin with its ProtocolServer", ErrUnavailable)
	}
	return (*fuse.ProtocolServer)(unsafe.Pointer(server)), nil
}

// possibleCPUs returns the kernel's count of possible CPUs, the number of
// queues it expects.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	last := s[strings.LastIndexAny(s, ",-")+1:]
	n, err := strconv.Atoi(last)
	if err != nil {
		return 0, fmt.Errorf("parsing /sys/devices/system/cpu/possible %q: %w", s, err)
	}
	return n + 1, nil
}

// queue is what the entries of one CPU share. Each entry has a ring of
// its own and a locked thread, pinned to the CPU, that waits on that ring
// alone and serves the entry's requests on itself, as each of go-fuse's
// /dev/fuse readers serves what it reads. The kernel hands a request to
// the entry given back last, by task work on the thread that gave it back:
// that thread is the one waiting on the entry's ring, so a request costs
// one wakeup, the one /dev/fuse costs, and a request that waits on the
// store holds its entry and its thread, never another's. A thread lives as
// long as its entry: the kernel cancels the commands of a thread that
// exits.
type queue struct {
	t       *Transport
	ps      *fuse.ProtocolServer
	qid     int
	depth   int32 // the entries, set before any serves
	entries []*entry

	inFlight atomic.Int32 // requests being served
}

// entry is one request buffer registered with the kernel: the header, the
// iovecs that describe it to the kernel, and the payload, in memory of its
// own that Go never moves, and the ring its thread submits its commands on.
type entry struct {
	q       *queue
	ring    *ring
	mem     []byte
	header  []byte
	payload []byte
	lastCmd uint32 // what to submit again when the kernel says EAGAIN
	// resident is how much of mem from its start requests and replies
	// have filled, in residentSteps (see Transport.resident).
	resident int
}

// An entry's memory: the header at 0, the two iovecs that describe the
// entry to the kernel at entryIovecOffset, the payload at entryPayloadOffset.
const (
	entryIovecOffset   = 512
	entryPayloadOffset = 4096
)

// entryTag is the user data of an entry's commands.
const entryTag = 0

// run sets the entry up on a thread of its own, which then serves it until
// the connection or the transport ends, and releases it.
func (e *entry) run(payloadSize int, started chan<- error) {
	defer e.q.t.done.Done()
	lockToCPU(e.q.qid)
	err := e.setUp(payloadSize)
	started <- err
	if err == nil {
		e.serve()
	}
	e.tearDown()
}

// lockToCPU keeps the calling goroutine on its thread for good (a locked
// goroutine's thread ends with it; see the package comment) and pins the
// thread to cpu.
func lockToCPU(cpu int) {
	runtime.LockOSThread()
	var cpus unix.CPUSet
	cpus.Set(cpu)
	unix.SchedSetaffinity(0, &cpus) // an offline CPU: run anywhere
}

func (e *entry) setUp(payloadSize int) error {
	var err error
	// One submission slot for the entry's command and one for the wake poll.
	if e.ring, err = newRing(2); err != nil {
		return err
	}
	if e.mem, err = unix.Mmap(-1, 0, entryPayloadOffset+payloadSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err != nil {
		return fmt.Errorf("allocating io_uring entries: %w", err)
	}
	e.header, e.payload = e.mem[:headerSize], e.mem[entryPayloadOffset:]
	e.touched(0)
	iov := unsafe.Slice((*unix.Iovec)(unsafe.Pointer(&e.mem[entryIovecOffset])), 2)
	iov[0].Base, iov[0].Len = &e.header[0], headerSize
	iov[1].Base, iov[1].Len = &e.payload[0], uint64(len(e.payload))
	e.queueCmd(cmdRegister)
	s, _, _ := e.ring.next()
	s.opcode, s.fd, s.opFlags, s.userData = opPollAdd, int32(e.q.t.wakeFD), unix.POLLIN, wakeTag
	if err := e.ring.submit(); err != nil {
		return err
	}
	// A registration the kernel refuses completes at once, with the
	// reason; an accepted one completes with the entry's first request,
	// which serve takes from the ring.
	var refused error
	e.ring.peek(func(c cqe) {
		if c.userData == entryTag && c.res < 0 && !retry(c) && refused == nil {
			refused = fmt.Errorf("registering FUSE io_uring queue %d: %w", e.q.qid, syscall.Errno(-c.res))
		}
	})
	return refused
}

// retry reports whether c asks for its command again.
func retry(c cqe) bool {
	return c.res == -int32(syscall.EAGAIN) || c.res == -int32(syscall.EINTR)
}

// queueCmd queues cmd for the entry.
func (e *entry) queueCmd(cmd uint32) {
	s, area, ok := e.ring.next()
	if !ok {
		panic("fuseuring: submission queue full") // one slot for the entry, one for the wake poll
	}
	e.lastCmd = cmd
	s.opcode, s.fd, s.off, s.userData = opURingCmd, int32(e.q.t.devFD), uint64(cmd), entryTag
	if cmd == cmdRegister {
		s.addr, s.len = uint64(uintptr(unsafe.Pointer(&e.mem[entryIovecOffset]))), 2
	} else {
		copy(area[8:16], e.header[headerCommitID:headerCommitID+8])
	}
	binary.NativeEndian.PutUint16(area[16:18], uint16(e.q.qid))
}

// serve takes the completions of the entry's ring and serves its requests,
// each reply going back with the command that fetches the next request,
// in the same system call as the wait for it, until the connection is
// gone or the transport is stopped.
func (e *entry) serve() {
	for {
		c, ok := e.ring.pop()
		switch {
		case !ok:
		case c.userData == wakeTag:
			return
		case retry(c):
			e.queueCmd(e.lastCmd)
		case c.res < 0:
			return // ENOTCONN: the connection is gone
		default:
			e.handle()
			e.queueCmd(cmdCommitAndFetch)
		}
		// The kernel refuses nothing short of the ring being gone.
		if e.ring.submitAndWait() != nil {
			return
		}
	}
}

// handle serves the request in the entry and leaves the reply in it.
func (e *entry) handle() {
	q, h := e.q, e.header
	q.t.requests.Add(1)
	busy := q.inFlight.Add(1)
	defer q.inFlight.Add(-1)
	q.t.notePeak(busy)
	if busy == q.depth {
		q.t.queueFull.Add(1)
	}
	inLen := int(binary.NativeEndian.Uint32(h[headerInOut:]))
	opcode := binary.NativeEndian.Uint32(h[headerInOut+4:])
	unique := binary.NativeEndian.Uint64(h[headerInOut+8:])
	payloadLen := int(binary.NativeEndian.Uint32(h[headerPayloadSz:]))
	opLen := inLen - inHeaderSize - payloadLen
	if opLen < 0 || opLen > headerOpInSize || payloadLen > len(e.payload) {
		replyError(e, unique, syscall.EIO)
		return
	}
	payload := e.payload[:payloadLen]
	if opcode != opWrite && payloadLen > 0 {
		// The reply is written over the payload, and some requests are
		// read while the reply is made (xattr names).
		payload = bytes.Clone(payload)
	}
	in := [][]byte{h[headerInOut : headerInOut+inHeaderSize], h[headerOpIn : headerOpIn+opLen], payload}
	out := [][]byte{h[headerInOut : headerInOut+outHeaderSize], e.payload}
	n, code := q.ps.HandleRequest(in, out)
	switch {
	case !code.Ok():
		replyError(e, unique, syscall.Errno(code))
	case n < outHeaderSize:
		// No reply (a FORGET or an INTERRUPT never comes this way), but
		// the entry must be given back.
		replyError(e, unique, syscall.ENOSYS)
	default:
		binary.NativeEndian.PutUint32(h[headerPayloadSz:], uint32(n-outHeaderSize))
	}
	e.touched(max(payloadLen, n-outHeaderSize))
}

// touched counts the first n bytes of the payload, and the header before
// it, as holding pages.
func (e *entry) touched(n int) {
	used := min(entryPayloadOffset+(n+residentStep-1)/residentStep*residentStep, len(e.mem))
	if used > e.resident {
		e.q.t.noteResident(used - e.resident)
		e.resident = used
	}
}

// replyError leaves an error reply to the request unique in e.
func replyError(e *entry, unique uint64, errno syscall.Errno) {
	h := e.header
	binary.NativeEndian.PutUint32(h[headerInOut:], outHeaderSize)
	binary.NativeEndian.PutUint32(h[headerInOut+4:], uint32(-int32(errno)))
	binary.NativeEndian.PutUint64(h[headerInOut+8:], unique)
	binary.NativeEndian.PutUint32(h[headerPayloadSz:], 0)
}

// tearDown releases the entry; closing its ring cancels what the kernel
// still holds of it.
func (e *entry) tearDown() {
	if e.ring != nil {
		e.ring.close()
	}
	if e.mem != nil {
		unix.Munmap(e.mem)
	}
}
