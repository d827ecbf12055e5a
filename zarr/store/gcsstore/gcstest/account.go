package gcstest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// UseServiceAccount writes the key file of a service account whose
// tokens come from tokenURL (a server of the test's), and makes it the
// credentials Google's clients find (GOOGLE_APPLICATION_CREDENTIALS, no
// emulator); it returns the file's path.
func UseServiceAccount(t testing.TB, tokenURL string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	account, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "zarrfs@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "account.json")
	if err := os.WriteFile(file, account, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	return file
}
