package store

import (
	"net/url"
	"strings"
)

// Redacted replaces the secrets a store URL may carry, the password (or a
// token given as the user name) and query parameters that hold
// signatures, tokens or keys (SAS sig=, X-Amz-Signature, ...), with ***,
// so that the URL can be logged, printed and put in the mount table. A
// string that is not a URL (a local path) is returned as it is.
func Redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return s
	}
	user := ""
	if u.User != nil {
		user = "***@"
		if _, ok := u.User.Password(); ok {
			user = url.User(u.User.Username()).String() + ":***@"
		}
		u.User = nil // put back below: url.URL would escape the asterisks
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			name, _, ok := strings.Cut(p, "=")
			if ok && secretParam(name) {
				params[i] = name + "=***"
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	out := u.String()
	if user != "" {
		out = strings.Replace(out, "//", "//"+user, 1)
	}
	return out
}

// secretParam reports whether a query parameter's name says it holds a
// secret.
func secretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, w := range []string{"sig", "token", "secret", "pass", "credential", "auth", "key"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
