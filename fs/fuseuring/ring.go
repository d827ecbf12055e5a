package fuseuring

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The part of the io_uring ABI this transport needs (include/uapi/linux/io_uring.h),
// written out by hand: FUSE commands need 128-byte submission entries, which
// the Go io_uring libraries do not offer.
const (
	setupSQE128  = 1 << 10 // IORING_SETUP_SQE128: an 80-byte command area
	setupCQSize  = 1 << 3  // IORING_SETUP_CQSIZE
	enterGetEvts = 1       // IORING_ENTER_GETEVENTS

	opPollAdd  = 6  // IORING_OP_POLL_ADD
	opURingCmd = 46 // IORING_OP_URING_CMD

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	sqeSize       = 128
	cqeSize       = 16
	sqeCmdOffset  = 48 // where the command area of an entry starts
	sqeCmdMaxSize = 80
)

// ringParams is struct io_uring_params.
type ringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqRingOffsets
	cqOff                                                                  cqRingOffsets
}

type sqRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// sqe is the fixed part of struct io_uring_sqe; cmd follows it.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64 // cmd_op (low 32 bits) for URING_CMD
	addr     uint64
	len      uint32
	opFlags  uint32
	userData uint64
	bufIndex uint16
	persona  uint16
	fileIdx  uint32
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// ring is one io_uring instance, used by one thread at a time.
type ring struct {
	fd               int
	sqMem, cqMem     []byte
	sqes             []byte
	sqHead, sqTail   *uint32
	sqMask           uint32
	sqArray          []uint32
	cqHead, cqTail   *uint32
	cqMask           uint32
	cqes             unsafe.Pointer
	pendingSubmitted uint32 // entries queued since the last enter
}

// newRing sets up a ring of n 128-byte submission entries.
func newRing(n uint32) (*ring, error) {
	p := ringParams{flags: setupSQE128 | setupCQSize, cqEntries: 2 * n}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(n), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, int(p.sqOff.array+p.sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err == nil {
		r.cqMem, err = unix.Mmap(r.fd, offCQRing, int(p.cqOff.cqes+p.cqEntries*cqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if err == nil {
		r.sqes, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries*sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	if err != nil {
		r.close()
		return nil, fmt.Errorf("mapping the io_uring: %w", err)
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = unsafe.Pointer(&r.cqMem[p.cqOff.cqes])
	return r, nil
}

// next returns the next free submission entry, zeroed, and its command
// area; ok is false when the queue is full.
func (r *ring) next() (e *sqe, cmd []byte, ok bool) {
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) > r.sqMask {
		return nil, nil, false
	}
	i := tail & r.sqMask
	b := r.sqes[i*sqeSize : (i+1)*sqeSize]
	clear(b)
	r.sqArray[i] = i
	atomic.StoreUint32(r.sqTail, tail+1)
	r.pendingSubmitted++
	return (*sqe)(unsafe.Pointer(&b[0])), b[sqeCmdOffset : sqeCmdOffset+sqeCmdMaxSize], true
}

// submit hands the kernel what next queued.
func (r *ring) submit() error { return r.enter(false) }

// submitAndWait hands the kernel what next queued, if anything, and then
// waits until there is a completion (or a signal came), in one system call.
func (r *ring) submitAndWait() error { return r.enter(true) }

// enter submits what next queued (all of it, over as many calls as the
// kernel needs) and, when wait, blocks until there is a completion or a
// signal came.
func (r *ring) enter(wait bool) error {
	var minComplete, flags uintptr
	if wait {
		minComplete, flags = 1, enterGetEvts
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.pendingSubmitted), minComplete, flags, 0, 0)
		switch {
		case errno == syscall.EINTR && r.pendingSubmitted > 0:
			continue // nothing was submitted
		case errno == syscall.EINTR:
			return nil // a signal ended the wait
		case errno != 0:
			return fmt.Errorf("io_uring_enter: %w", errno)
		case r.pendingSubmitted == 0:
			return nil
		case n == 0:
			return fmt.Errorf("io_uring_enter: took none of %d submissions", r.pendingSubmitted)
		}
		if r.pendingSubmitted -= uint32(n); r.pendingSubmitted == 0 {
			return nil
		}
	}
}

// pop consumes the oldest completion; ok is false when there is none.
func (r *ring) pop() (c cqe, ok bool) {
	head := *r.cqHead
	if head == atomic.LoadUint32(r.cqTail) {
		return cqe{}, false
	}
	c = *(*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize))
	atomic.StoreUint32(r.cqHead, head+1)
	return c, true
}

// peek calls f for every completion there is, consuming none.
func (r *ring) peek(f func(c cqe)) {
	tail := atomic.LoadUint32(r.cqTail)
	for head := *r.cqHead; head != tail; head++ {
		f(*(*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize)))
	}
}

func (r *ring) close() {
	for _, m := range [][]byte{r.sqes, r.cqMem, r.sqMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}
