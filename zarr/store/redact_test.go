package store

import "testing"

func TestRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"/data/store":                         "/data/store",
		"s3://bucket/prefix":                  "s3://bucket/prefix",
		"http://host:8080/a/b":                "http://host:8080/a/b",
		"http://user:pass@host/a":             "http://user:***@host/a",
		"https://ghp_TOKEN@host/a":            "https://***@host/a",
		"https://u%40x:p%3Aw@host/a?x=1":      "https://u%40x:***@host/a?x=1",
		"https://acct.blob/c?sv=1&sig=AbC%2B": "https://acct.blob/c?sv=1&sig=***",
		"https://b.s3/k?X-Amz-Credential=A&X-Amz-Signature=f00&X-Amz-Security-Token=t&part=2": "https://b.s3/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=***&part=2",
		"http://h/?access_token=1&api_key=2&password=3":                                       "http://h/?access_token=***&api_key=***&password=***",
	} {
		if got := Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}
