package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zarrfs/zarrfs/cache/cluster"
	"github.com/zarrfs/zarrfs/cache/diskcache"
	"github.com/zarrfs/zarrfs/fs"
	"github.com/zarrfs/zarrfs/fs/fuseuring"
	"github.com/zarrfs/zarrfs/fs/keyspace"
	"github.com/zarrfs/zarrfs/fs/metrics"
	"github.com/zarrfs/zarrfs/zarr"
	"github.com/zarrfs/zarrfs/zarr/engine"
	"github.com/zarrfs/zarrfs/zarr/store"
	"github.com/zarrfs/zarrfs/zarr/writeback"
)

func runMount(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := newFlags("mount", "STORE MOUNTPOINT", stderr)
	readOnly := flags.Bool("ro", false, "mount read-only")
	flags.BoolVar(readOnly, "read-only", false, "mount read-only (the same as --ro)")
	view := flags.String("view", "both", "key spaces to show: both (as v3/ and v2/), v3 or v2 (at the root)")
	sep := flags.String("v2-separator", ".", "dimension separator of v2 chunk keys: . or /")
	allowOther := flags.Bool("allow-other", false, "let other users access the mount, as --uid, --gid and --umask allow (the kernel checks them)")
	allowRoot := flags.Bool("allow-root", false, "let root access the mount besides the --uid user (its root directory is 0700 to the others; the kernel checks)")
	defaultPermissions := flags.Bool("default-permissions", false, "have the kernel check the modes of --uid, --gid and --umask for the mounting user too (on with --allow-other and --allow-root)")
	nonempty := flags.Bool("nonempty", false, "mount over a directory that is not empty, hiding its files until the unmount")
	uid := flags.Int("uid", os.Getuid(), "owner of every file and directory")
	gid := flags.Int("gid", os.Getgid(), "group of every file and directory")
	umask := flags.String("umask", "022", "permission bits (octal) cleared from 0666 for files and 0777 for directories; read-only mounts also clear the write bits")
	logLevel := flags.String("log-level", "info", "debug, info, warn or error (debug also logs every FUSE request)")
	cacheSize := flags.String("cache-size", "256MiB", "bound of the shard index and chunk cache (e.g. 64MiB, 1GiB, or bytes)")
	cacheDir := flags.String("cache-dir", "", "keep shard indexes and chunks of remote stores in this directory across mounts (default: none)")
	cacheDirSize := flags.String("cache-dir-size", "10GiB", "bound of --cache-dir")
	peers := flags.String("peers", "", "peer URLs (http://HOST:PORT,...) of the mounts of other machines sharing one cache for a remote store, this one's included")
	peerListen := flags.String("peer-listen", "", "HOST:PORT this mount serves its peers on (its peer URL is http://HOST:PORT)")
	peerToken := flags.String("peer-token", "", "shared secret of the peers: visible in ps, prefer --peer-token-file or $ZARRFS_PEER_TOKEN")
	peerTokenFile := flags.String("peer-token-file", "", "file holding the shared secret of the peers")
	peerCert := flags.String("peer-tls-cert", "", "this node's TLS certificate (PEM): peers then speak mutual TLS (https://)")
	peerKey := flags.String("peer-tls-key", "", "the key of --peer-tls-cert (PEM)")
	peerCA := flags.String("peer-ca", "", "CA (PEM) the peers' TLS certificates are verified against")
	peersFile := flags.String("peers-file", "", "file of peer URLs, one per line, re-read when it changes (instead of --peers)")
	peerVerify := flags.String("peer-verify", "all", "which values peers serve: all (each checked as far as its format allows; chunks without a crc32c are not), or crc32c-only (chunks and indexes a crc32c protects; the rest is read from the store)")
	revalidate := flags.Duration("revalidate", time.Second, "how long a cached shard index (and, on object stores, an array's listing) is trusted before the store is asked again")
	transcodeTo := flags.String("v2-transcode", keyspace.TranscodeRaw, "how the v2 view encodes chunks it must transcode: "+keyspace.TranscodeRaw+" (compressor null: cheapest to make and to read), "+keyspace.TranscodeBloscLZ4+" (compact copies of the view), or "+keyspace.TranscodeAuto+" (raw for arrays stored uncompressed, "+keyspace.TranscodeBloscLZ4+" for the others)")
	newShards := flags.String("new-shards", "64MiB", "how arrays created through the mount are stored: sharded, a shard holding whole inner chunks (the chunks written) up to this many bytes uncompressed; or \"unsharded\", as written")
	readAhead := flags.Int("read-ahead", 4, "how many transcoded chunks of the v2 view to prepare ahead of a reader reading an array's chunks in key order (0: none); only that: the rest of zarrfs's read-ahead is not tunable (see README)")
	transport := flags.String("fuse-transport", fs.TransportDevFuse, "how FUSE requests reach zarrfs: "+fs.TransportDevFuse+" (/dev/fuse) or "+fs.TransportIOURing+" (one queue per CPU; Linux 6.14+ with the fuse module's enable_uring on)")
	statsInterval := flags.Duration("stats-interval", 0, "log the counters of MNT/.zarrfs/stats this often (e.g. 1m; 0: never)")
	daemon := flags.Bool("daemon", false, "return once the mount is ready (exit status 0) and serve it in the background")
	logFile := flags.String("log-file", "", "append the log to this file (default: stderr, which systemd keeps in the journal)")
	metricsListen := flags.String("metrics-listen", "", "HOST:PORT to serve Prometheus metrics on, at /metrics (default: none)")
	sf := addStoreFlags(flags.FlagSet)
	options := addMountOptions(flags)
	cpuProfile := flags.String("cpuprofile", "", "") // for performance work: hidden
	if code, ok := parse(flags, args, 2, 2); !ok {
		return code
	}
	fail := options.fail // errors name the mount options that set their flags
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(stderr, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", *logLevel))
	}
	views, err := parseViews(*view)
	if err != nil {
		return fail(stderr, err)
	}
	if *sep != "." && *sep != "/" {
		return fail(stderr, fmt.Errorf("--v2-separator must be . or /, not %q", *sep))
	}
	cacheBytes, err := parseSize(*cacheSize)
	if err != nil {
		return fail(stderr, fmt.Errorf("--cache-size: %v", err))
	}
	verify, err := parsePeerVerify(*peerVerify)
	if err != nil {
		return fail(stderr, err)
	}
	newShardBytes := int64(-1)
	if *newShards != "unsharded" {
		if newShardBytes, err = parseSize(*newShards); err != nil || newShardBytes <= 0 {
			return fail(stderr, fmt.Errorf("--new-shards: %q is neither a positive size nor \"unsharded\"", *newShards))
		}
	}
	if *revalidate <= 0 {
		return fail(stderr, fmt.Errorf("--revalidate must be positive"))
	}
	if *transcodeTo != keyspace.TranscodeAuto && *transcodeTo != keyspace.TranscodeBloscLZ4 && *transcodeTo != keyspace.TranscodeRaw {
		return fail(stderr, fmt.Errorf("--v2-transcode must be %s, %s or %s, not %q", keyspace.TranscodeAuto, keyspace.TranscodeBloscLZ4, keyspace.TranscodeRaw, *transcodeTo))
	}
	if *readAhead < 0 {
		return fail(stderr, fmt.Errorf("--read-ahead must not be negative"))
	}
	switch *transport {
	case fs.TransportDevFuse:
	case fs.TransportIOURing:
		if err := fuseuring.Available(); err != nil {
			return fail(stderr, fmt.Errorf("--fuse-transport %s: %v", *transport, err))
		}
	default:
		return fail(stderr, fmt.Errorf("--fuse-transport must be %s or %s, not %q", fs.TransportDevFuse, fs.TransportIOURing, *transport))
	}
	if *statsInterval < 0 {
		return fail(stderr, fmt.Errorf("--stats-interval must not be negative"))
	}
	if *uid < 0 || *uid > math.MaxUint32-1 || *gid < 0 || *gid > math.MaxUint32-1 {
		return fail(stderr, fmt.Errorf("--uid and --gid must be user and group ids, not %d and %d", *uid, *gid))
	}
	mask, err := strconv.ParseUint(*umask, 8, 32)
	if err != nil || mask > 0o777 {
		return fail(stderr, fmt.Errorf("--umask must be octal permission bits such as 022 or 077, not %q", *umask))
	}
	if *daemon && !daemonChild() {
		return daemonize(args, *logFile, stderr)
	}
	if *logFile != "" {
		f, err := openLog(*logFile)
		if err != nil {
			return fail(stderr, err)
		}
		defer f.Close()
		stderr = f
	}
	started := newStarterLog(stderr) // until the mount is ready, a --daemon's starter reads the log too
	stderr = started
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sf.logger = logger
	// The cache is most of what zarrfs keeps in memory. A soft limit a
	// little above it makes the garbage collector run more often rather
	// than let the heap grow to twice what is live, so the process stays
	// within the cache size plus 64 MiB: the limit counts Go's memory, not
	// the binary's resident pages (about 21 MiB, the rest of the 64), and
	// the io_uring queues' buffers (outside the heap) are taken from it as
	// they fill while they are under 40 MiB (up to 19 CPUs). Taking all of
	// them at once made the collector run 4 times as often over io_uring
	// as over /dev/fuse in a cold read, for buffers that one reader never
	// fills.
	var buffersResident func(int64)
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		buffersResident = func(bytes int64) { debug.SetMemoryLimit(max(cacheBytes+40<<20-bytes, cacheBytes)) }
		buffersResident(0)
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return fail(stderr, fmt.Errorf("--cpuprofile: %v", err))
		}
		defer stop()
	}
	storeArg, mnt := flags.Arg(0), flags.Arg(1)
	loc, err := sf.parse(storeArg)
	if err != nil {
		return fail(stderr, err)
	}
	if err := checkMountpoint(mnt, *nonempty); err != nil {
		return fail(stderr, err)
	}
	if !*readOnly && !loc.Writable {
		logger.Warn("the store is not writable: mounting read-only", "store", store.Redacted(storeArg))
		*readOnly = true
	}
	s, err := sf.open(ctx, loc, *readOnly)
	if err != nil {
		return fail(stderr, err)
	}
	defer s.Close()
	h, err := zarr.Open(ctx, s)
	newStore := false
	if errors.Is(err, zarr.ErrNoNode) {
		// An empty store is a new one: its root group is written at the
		// first write.
		if h, err = zarr.OpenEmpty(ctx, s); err == nil && *readOnly {
			err = fmt.Errorf("the store is empty: mount it read-write to start a Zarr store in it")
		}
		newStore = err == nil
	}
	if err != nil {
		return fail(stderr, fmt.Errorf("%s: %w", store.Redacted(storeArg), err))
	}
	if newStore {
		logger.Info("the store is empty: mounted as a new Zarr v3 store, an empty root group whose zarr.json is written at the first write", "store", store.Redacted(storeArg))
	}
	if err := h.Undiscoverable(); err != nil {
		logger.Warn("mounting the root group alone", "error", err)
	}

	var writer *writeback.Writer
	journals, err := openJournals(loc, s, *sf.journalDir, !*readOnly)
	switch {
	case err != nil && !*readOnly:
		return fail(stderr, fmt.Errorf("read-write mount refused: zarrfs cannot keep its journal safely: %w (mount --ro to read the store)", err))
	case err != nil:
		logger.Warn("journals of writers that died are not read: their updates are not shown", "error", err)
	case journals != nil:
		defer journals.Close()
	}
	if !*readOnly {
		// Updates acknowledged by a mount that died go into the shards
		// before anything is served.
		if _, err := writeback.Recover(ctx, h, journals, logger); err != nil {
			return fail(stderr, fmt.Errorf("replaying journals: %w", err))
		}
		warnOtherWriters(h, journals, logger)
		writer, err = writeback.New(s, journals, writeback.Options{Logger: logger})
		if err != nil {
			return fail(stderr, err)
		}
	}
	var unpublished *writeback.Overlay
	if *readOnly {
		// Acknowledged writes of mounts that died are shown, not published.
		var infos []writeback.JournalInfo
		if unpublished, infos, err = writeback.LoadOverlay(h, journals, logger); err != nil {
			return fail(stderr, err)
		}
		for _, j := range infos {
			if !j.Alive && j.Records > 0 {
				logger.Warn("showing updates a writer that died left unpublished; zarrfs recover or a read-write mount publishes them", "journal", j.Dir, "updates", j.Records, "shards", len(j.Shards))
			}
		}
	}
	var disk *diskcache.Cache
	if *cacheDir != "" && !s.Remote() {
		logger.Warn("--cache-dir is for remote stores: this one is read from local files, which the kernel caches; the directory is not used", "cache_dir", *cacheDir)
	} else if *cacheDir != "" {
		size, err := parseSize(*cacheDirSize)
		if err != nil {
			return fail(stderr, fmt.Errorf("--cache-dir-size: %v", err))
		}
		if disk, err = diskcache.Open(*cacheDir, size); err != nil {
			return fail(stderr, fmt.Errorf("--cache-dir: %v", err))
		}
	}
	clustered := *peers != "" || *peersFile != "" || *peerListen != ""
	localCache := cacheBytes
	if clustered {
		// The node's share of the cluster's cache is part of --cache-size:
		// with both at the full size, the heap outgrows the memory limit
		// set above and the garbage collector runs without pause.
		localCache = cacheBytes / 2
	}
	ks := keyspace.New(h, keyspace.Options{V2Separator: *sep, V2Transcode: *transcodeTo, CacheBytes: localCache, Logger: logger, Writer: writer, Unpublished: unpublished, ReadAhead: *readAhead, FetchAhead: true, DiskCache: disk, Revalidate: *revalidate, NewShardBytes: newShardBytes, NewStore: newStore})
	if clustered {
		list := *peers
		if *peersFile != "" {
			if list, err = readPeers(*peersFile); err != nil {
				return fail(stderr, err)
			}
		}
		c, err := clusterOptions(list, *peerListen, peerSecrets{*peerToken, *peerTokenFile, *peerCert, *peerKey, *peerCA}, cacheBytes-localCache, logger)
		if err == nil {
			err = ks.JoinCluster(c, verify)
		}
		if err != nil {
			ks.Close()
			return fail(stderr, err)
		}
		logger.Info("joined the peers' cache", "self", c.Self, "peers", list)
		if *peersFile != "" {
			go watchPeers(ctx, *peersFile, c.Self, ks, logger)
		}
	}
	defer ks.Close()
	var onRequest func(string, time.Duration)
	if *metricsListen != "" {
		m := metrics.New(metrics.Sources{Keyspace: ks, Store: s, Writer: writer})
		addr, err := m.Serve(ctx, *metricsListen, logger)
		if err != nil {
			return fail(stderr, fmt.Errorf("--metrics-listen: %v", err))
		}
		logger.Info("serving metrics", "url", "http://"+addr.String()+"/metrics")
		onRequest = m.ObserveFUSE
	}
	sigs, stopSignals := notifySignals()
	defer stopSignals()
	server, err := fs.Mount(mnt, ks, fs.Options{
		Views: views, ReadOnly: *readOnly, AllowOther: *allowOther, AllowRoot: *allowRoot, DefaultPermissions: *defaultPermissions,
		UID: uint32(*uid), GID: uint32(*gid), Umask: uint32(mask),
		FsName: "zarrfs:" + s.String(), Logger: logger, Debug: level <= slog.LevelDebug,
		StatsInterval: *statsInterval, Transport: *transport, OnRequest: onRequest, OnBuffersResident: buffersResident,
	})
	if err != nil {
		if writer != nil {
			writer.Close(context.WithoutCancel(ctx))
		}
		return fail(stderr, fmt.Errorf("mount %s: %w", mnt, err))
	}
	logger.Info("mounted", "store", s.String(), "mountpoint", mnt, "view", *view, "read_only", *readOnly)
	u := &unmounter{server: server, mnt: mnt, writer: writer, logger: logger, abandoned: ks.Abandoned}
	if journals != nil {
		u.journals = journals.String()
	}
	ctl, err := listenControl(mnt, func(r *controlRequest) { u.request(ctx, r) })
	if err != nil {
		logger.Warn("no control socket: zarrfs umount cannot wait for this mount's writes (umount(8) still unmounts)", "error", err)
	}
	started.ready(fmt.Sprintf("%s mounted at %s", store.Redacted(storeArg), mnt))
	done := make(chan struct{})
	go u.run(ctx, sigs, done)
	server.Wait()
	close(done)
	notifySystemd("STOPPING=1\nSTATUS=unmounted; publishing what is pending")
	code := u.finish(ctx)
	ctl.close()
	if code != 0 {
		return fail(stderr, errors.New("some writes could not be published (see above)"))
	}
	return 0
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func parseViews(v string) ([]keyspace.View, error) {
	switch v {
	case "both":
		return []keyspace.View{keyspace.V3, keyspace.V2}, nil
	case "v3":
		return []keyspace.View{keyspace.V3}, nil
	case "v2":
		return []keyspace.View{keyspace.V2}, nil
	}
	return nil, fmt.Errorf("--view must be both, v3 or v2, not %q", v)
}

// parseSize reads sizes such as 64MiB, 1GiB, 512KB or plain bytes.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(num, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != num {
		return 0, fmt.Errorf("%q is not a size like 64MiB, 1GiB or 1048576", s)
	}
	return n * mult, nil
}

// checkMountpoint refuses mount points that are missing, not directories,
// already mounted on, or, unless nonempty, not empty.
func checkMountpoint(mnt string, nonempty bool) error {
	fi, err := os.Stat(mnt)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", mnt, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", mnt)
	}
	if mounted, err := fs.Mounted(mnt); err == nil && mounted {
		return fmt.Errorf("mount point %s is busy: something is already mounted there", mnt)
	}
	entries, err := os.ReadDir(mnt)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", mnt, err)
	}
	if len(entries) > 0 && !nonempty {
		return fmt.Errorf("mount point %s is not empty (--nonempty, or -o nonempty, mounts over its files)", mnt)
	}
	return nil
}

func runUmount(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := newFlags("umount", "MOUNTPOINT", stderr)
	force := flags.Bool("force", false, "publish what was written and detach the mount even while files in it are open (they keep working until closed)")
	if code, ok := parse(flags, args, 1, 1); !ok {
		return code
	}
	mnt := flags.Arg(0)
	if err := checkZarrfsMount(mnt); err != nil {
		return fail(stderr, err)
	}
	if code, ok := umountVia(mnt, *force, stdout, stderr); ok {
		return code
	}
	// No zarrfs process of this user answers for it: ask the kernel.
	if err := unmount(mnt, *force); err != nil {
		return fail(stderr, fmt.Errorf("umount %s: %w", mnt, err))
	}
	fmt.Fprintf(stderr, "zarrfs: unmounted %s without waiting: no mount process of this user answered for it\n", mnt)
	return 0
}

// unmount detaches a FUSE mount: directly as root, through fusermount3
// otherwise. A lazy unmount succeeds even when the mount is busy.
func unmount(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		return syscall.Unmount(mnt, flags)
	}
	args := []string{"-u", mnt}
	if lazy {
		args = []string{"-u", "-z", mnt}
	}
	out, err := exec.Command("fusermount3", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// parsePeerVerify reads --peer-verify.
func parsePeerVerify(s string) (engine.PeerVerify, error) {
	switch s {
	case "all":
		return engine.PeersForAll, nil
	case "crc32c-only":
		return engine.PeersForCRC32C, nil
	}
	return 0, fmt.Errorf("--peer-verify %q: all or crc32c-only", s)
}

// peerSecrets are how the peers prove who they are: a shared token
// (from a file, the environment, or the command line, where ps shows it)
// and optionally TLS.
type peerSecrets struct{ token, tokenFile, cert, key, ca string }

// clusterOptions are the options of this mount's node of the peers' cache.
func clusterOptions(peers, listen string, sec peerSecrets, cacheBytes int64, logger *slog.Logger) (cluster.Options, error) {
	if peers == "" || listen == "" {
		return cluster.Options{}, fmt.Errorf("--peers (or --peers-file) and --peer-listen go together")
	}
	token := sec.token
	if token != "" {
		logger.Warn("--peer-token is on the command line, where every local user sees it (ps): use --peer-token-file or $ZARRFS_PEER_TOKEN")
	}
	switch {
	case sec.tokenFile != "":
		b, err := os.ReadFile(sec.tokenFile)
		if err != nil {
			return cluster.Options{}, fmt.Errorf("--peer-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	case os.Getenv("ZARRFS_PEER_TOKEN") != "":
		token = os.Getenv("ZARRFS_PEER_TOKEN")
	}
	if token == "" {
		return cluster.Options{}, fmt.Errorf("a cluster needs --peer-token-file, $ZARRFS_PEER_TOKEN or --peer-token: the peer port is otherwise open to anyone who reaches it")
	}
	o := cluster.Options{Listen: listen, Token: token, CacheBytes: cacheBytes}
	scheme := "http://"
	if sec.cert != "" || sec.key != "" || sec.ca != "" {
		if sec.cert == "" || sec.key == "" || sec.ca == "" {
			return cluster.Options{}, fmt.Errorf("--peer-tls-cert, --peer-tls-key and --peer-ca go together")
		}
		var err error
		if o.TLS, err = cluster.LoadTLS(sec.cert, sec.key, sec.ca); err != nil {
			return cluster.Options{}, err
		}
		scheme = "https://"
	}
	o.Self = scheme + listen
	o.Peers = strings.Split(peers, ",")
	if !slices.Contains(o.Peers, o.Self) {
		o.Peers = append(o.Peers, o.Self)
	}
	return o, nil
}

// readPeers reads a peers file: one URL per line; blank lines and lines
// starting with # are skipped.
func readPeers(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--peers-file: %w", err)
	}
	var list []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			list = append(list, line)
		}
	}
	return strings.Join(list, ","), nil
}

// watchPeers re-reads the peers file when it changes, every few seconds.
func watchPeers(ctx context.Context, path, self string, ks *keyspace.FS, logger *slog.Logger) {
	var last time.Time
	if fi, err := os.Stat(path); err == nil {
		last = fi.ModTime()
	}
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fi, err := os.Stat(path)
		if err != nil || fi.ModTime().Equal(last) {
			continue
		}
		last = fi.ModTime()
		list, err := readPeers(path)
		if err != nil {
			logger.Warn("peers file unreadable; keeping the peers", "error", err)
			continue
		}
		peers := strings.Split(list, ",")
		if !slices.Contains(peers, self) {
			peers = append(peers, self)
		}
		ks.SetPeers(peers...)
		logger.Info("peers changed", "peers", peers)
	}
}
