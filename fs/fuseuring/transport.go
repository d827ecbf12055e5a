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
//   - A queue's goroutine keeps its OS thread from start to end. The kernel
//     hands a request to an entry by task work on the thread that submitted
//     the entry's command; were that thread lent to other goroutines, it
//     could sit in a wait on this very mount (go-fuse's mount-time LOOKUP)
//     and the request meant for it would never be delivered.
//   - So the queue's thread only moves entries: requests are served on
//     ordinary goroutines, never on the locked thread.
//
// A queue overlaps its requests, as go-fuse's /dev/fuse loop does with its
// goroutines: each request is served on a goroutine of its own, so one
// waiting on the store holds only its entry, and the queue's thread alone
// submits to the ring (the reply goes back with the entry's next
// COMMIT_AND_FETCH, which the handler asks the thread for through an
// eventfd the ring polls). A queue keeps depth entries registered, the
// most requests of its CPU under way at once; beyond them the kernel holds
// requests until an entry is given back.
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

	// The entries a queue keeps registered: up to transportEntries over
	// all queues, at least minQueueDepth and at most maxQueueDepth a
	// queue. Each holds a payload buffer of MaxWrite bytes (at least
	// 128 KiB) plus a page, touched as requests use it: 2 CPUs, 32 a
	// queue, 1 MiB writes make at most 64 MiB.
	transportEntries = 64
	minQueueDepth    = 8
	maxQueueDepth    = 32

	// wakeTag marks the completion of the poll on the wake eventfd,
	// doneTag that of the poll on a queue's eventfd of replies.
	wakeTag = ^uint64(0)
	doneTag = ^uint64(1)
)

// queueDepth returns the entries each of cpus queues registers.
func queueDepth(cpus int) int {
	return min(max(transportEntries/cpus, minQueueDepth), maxQueueDepth)
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
	requests      atomic.Uint64
}

// Requests returns how many requests the queues have served.
func (t *Transport) Requests() uint64 { return t.requests.Load() }

// Wait returns when every queue has ended, which they do when the mount is
// gone.
func (t *Transport) Wait() { t.done.Wait() }

// mountMu makes the descriptor a mount adds to the process identifiable.
var mountMu sync.Mutex

// Mount mounts fs at dir, as fuse.NewServer followed by Serve and WaitMount
// do, with every request the kernel sends over io_uring served by the
// returned Transport. Unmount through the server; wait for both.
func Mount(dir string, fs fuse.RawFileSystem, opts fuse.MountOptions) (*fuse.Server, *Transport, error) {
	if err := Available(); err != nil {
		return nil, nil, err
	}
	opts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
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
// io_uring only once every queue has registered) and returns when all have.
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
	payloadSize := max(opts.MaxWrite, 128<<10)
	errs := make(chan error, cpus)
	for qid := range cpus {
		q := &queue{t: t, ps: ps, qid: qid, depth: queueDepth(cpus), payloadSize: payloadSize, doneFD: -1}
		t.done.Add(1)
		go q.run(errs)
	}
	var first error
	for range cpus {
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

// queue is the ring of one CPU and its entries. Only the queue's thread
// touches the ring and the fields above mu.
type queue struct {
	t           *Transport
	ps          *fuse.ProtocolServer
	qid         int
	depth       int
	payloadSize int
	ring        *ring
	entries     []*entry
	live        int  // entries the kernel has not ended
	stopped     bool // the transport was stopped
	doneFD      int  // eventfd a handler signals when it left a reply

	mu       sync.Mutex
	replied  []int          // entries whose reply is ready to commit
	handlers sync.WaitGroup // requests being served
}

// entry is one request buffer registered with the kernel: the header, the
// iovecs that describe it to the kernel, and the payload, in memory of its
// own that Go never moves.
type entry struct {
	mem     []byte
	header  []byte
	payload []byte
	lastCmd uint32 // what to submit again when the kernel says EAGAIN
}

// An entry's memory: the header at 0, the two iovecs that describe the
// entry to the kernel at entryIovecOffset, the payload at entryPayloadOffset.
const (
	entryIovecOffset   = 512
	entryPayloadOffset = 4096
)

func (q *queue) run(started chan<- error) {
	defer q.t.done.Done()
	// See the package comment: this thread is the queue's for good, and a
	// locked goroutine's thread ends with it.
	runtime.LockOSThread()
	var cpus unix.CPUSet
	cpus.Set(q.qid)
	unix.SchedSetaffinity(0, &cpus) // an offline CPU: run anywhere
	err := q.setUp()
	started <- err
	if err != nil {
		q.tearDown()
		return
	}
	q.serve()
	q.tearDown()
}

func (q *queue) setUp() error {
	var err error
	if q.doneFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	// One submission slot per entry and one per poll: an entry has at
	// most one command queued.
	if q.ring, err = newRing(uint32(q.depth + 2)); err != nil {
		return err
	}
	for range q.depth {
		mem, err := unix.Mmap(-1, 0, entryPayloadOffset+q.payloadSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("allocating io_uring entries: %w", err)
		}
		e := &entry{mem: mem, header: mem[:headerSize], payload: mem[entryPayloadOffset:]}
		iov := unsafe.Slice((*unix.Iovec)(unsafe.Pointer(&mem[entryIovecOffset])), 2)
		iov[0].Base, iov[0].Len = &e.header[0], headerSize
		iov[1].Base, iov[1].Len = &e.payload[0], uint64(len(e.payload))
		q.entries = append(q.entries, e)
	}
	q.live = len(q.entries)
	for i := range q.entries {
		q.submit(i, cmdRegister)
	}
	q.poll(q.t.wakeFD, wakeTag)
	q.poll(q.doneFD, doneTag)
	if err := q.ring.enter(false); err != nil {
		return err
	}
	// A registration the kernel refuses completes at once, with the
	// reason; an accepted one completes with the entry's first request.
	var refused error
	q.ring.reap(func(c cqe) {
		if c.userData != wakeTag && c.userData != doneTag && c.res < 0 && !retry(c) {
			refused = fmt.Errorf("registering FUSE io_uring queue %d: %w", q.qid, syscall.Errno(-c.res))
			return
		}
		q.complete(c)
	})
	return refused
}

// retry reports whether c asks for its command again.
func retry(c cqe) bool {
	return c.res == -int32(syscall.EAGAIN) || c.res == -int32(syscall.EINTR)
}

// next returns the ring's next submission entry, which setUp sized so
// that there always is one.
func (q *queue) next() (*sqe, []byte) {
	s, area, ok := q.ring.next()
	if !ok {
		panic("fuseuring: submission queue full") // one slot per entry, plus the polls
	}
	return s, area
}

// poll queues a one-shot poll for fd to become readable.
func (q *queue) poll(fd int, tag uint64) {
	s, _ := q.next()
	s.opcode, s.fd, s.opFlags, s.userData = opPollAdd, int32(fd), unix.POLLIN, tag
}

// submit queues cmd for entry i.
func (q *queue) submit(i int, cmd uint32) {
	s, area := q.next()
	e := q.entries[i]
	e.lastCmd = cmd
	s.opcode, s.fd, s.off, s.userData = opURingCmd, int32(q.t.devFD), uint64(cmd), uint64(i)
	if cmd == cmdRegister {
		s.addr, s.len = uint64(uintptr(unsafe.Pointer(&e.mem[entryIovecOffset]))), 2
	} else {
		copy(area[8:16], e.header[headerCommitID:headerCommitID+8])
	}
	binary.NativeEndian.PutUint16(area[16:18], uint16(q.qid))
}

// serve moves entries until the kernel ends every one (the mount is gone)
// or the transport is stopped.
func (q *queue) serve() {
	for q.live > 0 && !q.stopped {
		if err := q.ring.enter(true); err != nil {
			return
		}
		q.ring.reap(q.complete)
	}
}

// complete acts on one completion: a request to serve, a command to
// submit again, an entry the kernel has ended, replies to commit, or the
// wake poll.
func (q *queue) complete(c cqe) {
	switch {
	case c.userData == wakeTag:
		q.stopped = true
	case c.userData == doneTag:
		q.commitReplied()
	case retry(c):
		i := int(c.userData)
		q.submit(i, q.entries[i].lastCmd)
	case c.res < 0:
		q.live-- // ENOTCONN: the connection is gone
	default:
		i := int(c.userData)
		q.handlers.Add(1)
		go q.serveEntry(i)
	}
}

// serveEntry serves the request in entry i and asks the queue's thread to
// commit the reply.
func (q *queue) serveEntry(i int) {
	defer q.handlers.Done()
	q.handle(i)
	q.mu.Lock()
	q.replied = append(q.replied, i)
	q.mu.Unlock()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(q.doneFD, one[:]) // cannot fail short of 2^64-1 unread signals
}

// commitReplied submits the COMMIT_AND_FETCH of every entry whose reply is
// ready, and polls for the next ones. The eventfd is emptied before the
// list is taken: a reply added after it signals again.
func (q *queue) commitReplied() {
	var count [8]byte
	unix.Read(q.doneFD, count[:])
	q.mu.Lock()
	replied := q.replied
	q.replied = nil
	q.mu.Unlock()
	for _, i := range replied {
		q.submit(i, cmdCommitAndFetch)
	}
	q.poll(q.doneFD, doneTag)
}

// handle serves the request in entry i and leaves the reply in it.
func (q *queue) handle(i int) {
	e := q.entries[i]
	h := e.header
	q.t.requests.Add(1)
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
}

// replyError leaves an error reply to the request unique in e.
func replyError(e *entry, unique uint64, errno syscall.Errno) {
	h := e.header
	binary.NativeEndian.PutUint32(h[headerInOut:], outHeaderSize)
	binary.NativeEndian.PutUint32(h[headerInOut+4:], uint32(-int32(errno)))
	binary.NativeEndian.PutUint64(h[headerInOut+8:], unique)
	binary.NativeEndian.PutUint32(h[headerPayloadSz:], 0)
}

// tearDown releases the queue once no request is being served: a handler
// writes its reply into its entry's memory. (Requests under way end when
// the connection does: go-fuse cancels them.)
func (q *queue) tearDown() {
	q.handlers.Wait()
	if q.ring != nil {
		q.ring.close() // cancels what the kernel still holds
	}
	for _, e := range q.entries {
		unix.Munmap(e.mem)
	}
	if q.doneFD >= 0 {
		unix.Close(q.doneFD)
	}
}
