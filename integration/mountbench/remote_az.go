package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zarrfs/zarrfs/zarr/store/azstore/aztest"
)

// azRemote adds workload 8's rows for az://: the array uploaded to Azurite
// behind the same latency, read cold by zarr-python 2 through MNT/v2 of an
// az:// mount, against zarrita's direct reads (direct, directReqs) that
// remote measured.
func (b *bench) azRemote(spec *arraySpec, direct sample, directReqs map[string]int, nbytes int64) error {
	logFile, err := os.Create(filepath.Join(b.work, "azurite.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	dir := filepath.Join(b.work, "azurite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	srv, stop, err := aztest.StartServer(dir, logFile)
	if err != nil {
		b.add(row{name: "az:// skipped: " + err.Error(), check: "-"})
		return nil
	}
	defer stop()
	ctx := context.Background()
	progress("uploading the " + spec.name + " array to Azurite")
	if err := srv.CreateContainer(ctx, "bench"); err != nil {
		return err
	}
	if err := srv.UploadDir(ctx, filepath.Join(b.storeDir, spec.name), "bench", "store/"+spec.name); err != nil {
		return err
	}
	if err := srv.UploadDir(ctx, filepath.Join(b.work, "s3-root"), "bench", "store"); err != nil { // the root zarr.json
		return err
	}
	host, _ := strings.CutSuffix(srv.Endpoint, "/"+aztest.Account)
	proxy, err := newDelayProxy(host)
	if err != nil {
		return err
	}
	defer proxy.srv.Close()
	for _, kv := range aztest.Env(proxy.srv.URL + "/" + aztest.Account) {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	mnt := filepath.Join(b.work, "az-mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	defer b.ms.stopZarrfs(mnt)
	arrayV2 := filepath.Join(mnt, "v2", spec.name)
	var viaMount sample
	var reqs map[string]int
	var rss peakRSSOf
	for range b.cfg.runs {
		if err := b.ms.stopZarrfs(mnt); err != nil {
			return err
		}
		if err := dropCaches(); err != nil {
			return err
		}
		proxy.take()
		m, err := b.ms.startZarrfs(b.bin, "az://bench/store", mnt, append([]string{"--ro"}, b.cfg.mountArgs...)...)
		if err != nil {
			return err
		}
		times, _, err := b.python("zarr", 0, 1, arrayV2)
		if err != nil {
			return err
		}
		viaMount, reqs = append(viaMount, times[arrayV2]...), proxy.take()
		rss.add(m)
	}
	b.add(row{
		name:   "zarr-python via MNT/v2 of az:// (Azurite) vs zarrita direct over HTTP" + rss.String(),
		zarrfs: rate(nbytes, viaMount.median()), ref: rate(nbytes, direct.median()),
		ratio: ratio(direct, viaMount), atLeast: 1.0, spread: max(direct.spread(), viaMount.spread()),
	})
	b.add(row{
		name:   fmt.Sprintf("requests: zarr-python via az:// mount %v; zarrita %v (Azure has no suffix ranges: an index costs a HEAD and a ranged GET)", reqs, directReqs),
		zarrfs: fmt.Sprint(total(reqs)), ref: fmt.Sprint(total(directReqs)), check: "-",
	})
	return nil
}
