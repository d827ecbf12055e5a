package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/zarr/store/storetest/faultproxy"
)

// TestEndpointThatNeverAnswers: `zarrfs info` and `zarrfs mount` of an
// s3://, gs:// or http:// store whose server accepts connections and never
// answers fail within the deadline, naming the server and the timeout;
// mount says what it waits for after a second.
func TestEndpointThatNeverAnswers(t *testing.T) {
	hole := faultproxy.Start(t, "http://127.0.0.1:1") // never reached
	hole.SetRule(func(*http.Request) faultproxy.Fault { return faultproxy.Fault{Stall: true} })
	host := strings.TrimPrefix(hole.URL, "http://")
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("STORAGE_EMULATOR_HOST", host) // gs://
	t.Setenv("GOMEMLIMIT", "off")           // mount sets a memory limit otherwise
	limits := []string{"--remote-timeout", "700ms", "--remote-deadline", "2s"}
	for _, storeURL := range []string{"s3://bucket/store", "gs://bucket/store", hole.URL + "/store"} {
		s3 := []string{"--s3-endpoint", hole.URL, "--s3-path-style"}
		if !strings.HasPrefix(storeURL, "s3://") {
			s3 = nil
		}
		mnt := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			append(append(append([]string{"info"}, limits...), s3...), storeURL),
			append(append(append([]string{"mount"}, limits...), s3...), storeURL, mnt),
		} {
			start := time.Now()
			code, _, stderr := runCLI(t, args...)
			took := time.Since(start)
			t.Logf("zarrfs %s: exit %d after %s:\n%s", strings.Join(args, " "), code, took.Round(time.Millisecond), stderr)
			if code != 1 || !strings.Contains(stderr, host) || !strings.Contains(stderr, "no response within") || !strings.Contains(stderr, "deadline 2s") {
				t.Errorf("zarrfs %s %s: exit %d, stderr %q; want exit 1 and an error naming %s and the timeout", args[0], storeURL, code, stderr, host)
			}
			if took > 2*time.Second+10*time.Second {
				t.Errorf("zarrfs %s %s failed after %s, the deadline is 2s", args[0], storeURL, took)
			}
			if args[0] == "mount" && !strings.Contains(stderr, "waiting for the store's first answer") {
				t.Errorf("zarrfs mount %s did not say what it waits for:\n%s", storeURL, stderr)
			}
		}
	}
}
