package integration_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zarrfs/zarrfs/integration"
	"github.com/zarrfs/zarrfs/zarr/zarrtest"
)

// TestClusterWrongToken: two nodes whose tokens differ read from the
// store, and each says so in its log once per peer, with the cause: the
// asking node that its peer refuses its token, the answering node that it
// refused a peer whose token differs.
func TestClusterWrongToken(t *testing.T) {
	clusterStore(t, "token")
	t.Setenv("ZARRFS_PEER_TOKEN", "")
	addrs := []string{freeAddr(t), freeAddr(t)}
	peers := "http://" + addrs[0] + ",http://" + addrs[1]
	var nodes []*integration.Mount
	for i, a := range addrs {
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("secret-of-node-"+string(rune('a'+i))), 0o600); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, mount(t, "s3://zarr/token", "--ro", "--peers", peers, "--peer-listen", a, "--peer-token-file", token))
	}
	for _, m := range nodes {
		arrayFiles(t, m.Dir, crcArrays, time.Minute) // from the store: no peer answers
	}
	for i, m := range nodes {
		other := "http://" + addrs[1-i]
		log := m.Log()
		var asked, refused []string
		for line := range strings.Lines(log) {
			switch {
			case strings.Contains(line, `msg="a peer's requests fail`):
				asked = append(asked, line)
			case strings.Contains(line, `msg="refused a peer's requests"`):
				refused = append(refused, line)
			}
		}
		if len(asked) != 1 || !strings.Contains(asked[0], "peer="+other) || !strings.Contains(asked[0], "refuses this node's peer token") {
			t.Errorf("node %d logs %d lines on its requests to its peer, want one naming %s and the token:\n%s", i+1, len(asked), other, strings.Join(asked, ""))
		}
		if len(refused) != 1 || !strings.Contains(refused[0], "from=127.0.0.1") || !strings.Contains(refused[0], "token differs") {
			t.Errorf("node %d logs %d lines on the requests it refused, want one naming the address and the token:\n%s", i+1, len(refused), strings.Join(refused, ""))
		}
		if strings.Contains(log, "secret-of-node") {
			t.Errorf("node %d logs a token:\n%s", i+1, log)
		}
	}
}

// TestMountWarnings: a second read-write mount of a store is warned
// about, and so is --cache-dir on a local store, which does not use it.
func TestMountWarnings(t *testing.T) {
	store := t.TempDir()
	zarrtest.WriteV3Store(t, store)
	first := mount(t, store)
	second := mount(t, store, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	if log := second.Log(); !strings.Contains(log, "another read-write mount of this store is running") {
		t.Errorf("the second read-write mount of a store does not warn:\n%s", log)
	}
	if log := second.Log(); !strings.Contains(log, "--cache-dir is for remote stores") {
		t.Errorf("--cache-dir on a local store is ignored without a word:\n%s", log)
	}
	if log := first.Log(); strings.Contains(log, "another read-write mount") {
		t.Errorf("the first mount warns of another:\n%s", log)
	}
	reader := mount(t, store, "--ro")
	if log := reader.Log(); strings.Contains(log, "another read-write mount") {
		t.Errorf("a read-only mount warns of the writers:\n%s", log)
	}
}
