# zarrfs: see README.md. Every target works on a fresh Debian 12 machine with Go
# (and, for the integration tests, fuse3 and Debian's python3-zarr: see .ci/run).

GO        ?= go
BIN       := bin/zarrfs
FUZZTIME  ?= 100000x
DEMO_DIR  ?= /tmp/zarrfs-demo
PREFIX    ?= /usr/local
SBINDIR   ?= /sbin

.PHONY: all build install test lint unit test-io-uring fuzz bench bench-deps demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/zarrfs

# zarrfs, and the link mount(8) runs for `mount -t fuse.zarrfs` and fstab
# lines of that type (see README.md, Run by the system).
install: build
	install -D -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/zarrfs
	install -d $(DESTDIR)$(SBINDIR)
	ln -sf $(PREFIX)/bin/zarrfs $(DESTDIR)$(SBINDIR)/mount.fuse.zarrfs

# The README's test command: static checks, every test with the race
# detector (integration tests mount for real and need root and /dev/fuse),
# the integration tests again with every mount served over io_uring, then a
# short run of every fuzz target.
test: lint unit test-io-uring fuzz

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

unit:
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -count=1 -tags purego ./codec/blosc/  # the portable fallback of the SSE2 unshuffle
	$(GO) test -count=1 -run '^(TestCheck|TestDecompressAllocs)$$' ./codec/ ./codec/blosc/  # allocation counts, which -race cannot measure

# The integration tests with every mount served over FUSE-over-io_uring
# (--fuse-transport io_uring, fs/fuseuring): the lever must cost no
# correctness. It turns the fuse module's enable_uring on, which changes
# nothing for daemons that do not ask for io_uring, and skips, saying so,
# where it cannot.
URING_PARAM := /sys/module/fuse/parameters/enable_uring
test-io-uring:
	@if [ "$$(id -u)" = 0 ] && [ -e $(URING_PARAM) ] && echo Y > $(URING_PARAM); then \
	  echo "integration tests over io_uring"; \
	  ZARRFS_TEST_MOUNT_ARGS="--fuse-transport io_uring" $(GO) test -race -count=1 -timeout 30m ./integration/; \
	else echo "SKIP: test-io-uring needs root and a kernel with $(URING_PARAM)"; fi

# Runs each fuzz target for FUZZTIME, a count of executions by default: a
# wall-clock -fuzztime can fail a clean run with "context deadline exceeded"
# when the deadline races an in-flight worker (go.dev/issue/75804, unfixed in
# Go 1.26). make fuzz FUZZTIME=10m for a long run.
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
	  pkg=./$$(dirname $$f); \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s $$pkg > /tmp/zarrfs-fuzz.log 2>&1 || { cat /tmp/zarrfs-fuzz.log; exit 1; }; \
	  done; \
	done

# The codec and zarr benchmarks, c-blosc against our blosc (ratios per
# frame), then the mount-level harness: one table of medians against native
# with PASS/MISS per target (root, FUSE and bindfs; about 15 minutes, see
# integration/mountbench), also written to $(BENCHOUT).txt and drawn as a
# chart in $(BENCHOUT).png. make bench BENCHFLAGS=-quick for a short run.
BENCHFLAGS ?=
BENCHOUT   ?= bin/bench
bench: build
	$(GO) test -run='^$$' -bench=. -benchmem ./codec/... ./zarr/...
	@d=$$(mktemp -d) && /usr/bin/python3 codec/blosc/testdata/bench_cblosc.py --dir $$d; rc=$$?; rm -rf $$d; exit $$rc
	$(GO) run ./integration/mountbench -bin $(BIN) -out $(BENCHOUT).txt $(BENCHFLAGS)

# What make bench reads with besides zarrfs (root, Debian): FUSE, bindfs,
# zarr-python 2, and rclone and s3fs, the contenders of workload compare
# (issue 30), which skips those missing. zarrita is the oracle .ci/run
# installs (ZARRFS_ORACLE).
bench-deps:
	apt-get install -y fuse3 bindfs python3-zarr rclone s3fs

# Writes the sample store, then mounts it in the foreground (Ctrl-C unmounts).
demo: build
	@if grep -qs " $(DEMO_DIR)/mnt " /proc/mounts; then ./$(BIN) umount $(DEMO_DIR)/mnt; fi
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)/mnt
	./$(BIN) demo $(DEMO_DIR)/store
	@echo
	@echo "Mounting at $(DEMO_DIR)/mnt. In another terminal, try (./$(BIN) is the zarrfs just built;"
	@echo "make install puts it on PATH as zarrfs. /usr/bin/python3 is Debian's, whose python3-zarr is"
	@echo "zarr-python 2, a legacy reader the v2/ view is for: another python3 may lack zarr or have zarr 3):"
	@echo "  ./$(BIN) info $(DEMO_DIR)/store                    # the store's arrays, shards and codecs"
	@echo "  ls $(DEMO_DIR)/mnt/v3/volume/0/c/0/0            # inner chunks as files"
	@echo "  ls $(DEMO_DIR)/mnt/v2/volume/0/0/0              # the same chunks as v2 keys (/-separated: OME-Zarr 0.4)"
	@echo "  getfattr -d $(DEMO_DIR)/mnt/v3/volume/0/c/0/0/0  # where its bytes live in the shard"
	@echo "  ls $(DEMO_DIR)/mnt/v2/volume/labels/mask/0/2/2    # sparse: only stored chunks have files"
	@echo "  cat $(DEMO_DIR)/mnt/v2/volume/.zattrs              # the OME-Zarr 0.5 image as OME-Zarr 0.4"
	@echo "  /usr/bin/python3 -c \"import zarr; g = zarr.open_consolidated('$(DEMO_DIR)/mnt/v2'); print(g.tree()); print(g['volume/0'][100, 100, :8])\""
	@echo "  /usr/bin/python3 -c \"import xarray as xr; print(xr.open_zarr('$(DEMO_DIR)/mnt/v2', group='volume'))\""
	@echo "Press Ctrl-C here to unmount."
	./$(BIN) mount $(DEMO_DIR)/store $(DEMO_DIR)/mnt

clean:
	rm -rf bin
