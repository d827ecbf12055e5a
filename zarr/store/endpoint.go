package store

import (
	"net"
	"net/url"
	"strings"
)

// Endpoint is a server's URL as a store's identity (String) names it: the
// scheme and host in lower case, without the scheme's default port, a
// trailing '/' or a fragment, and with its secrets redacted (Redacted). The
// spellings of one URL then name one store, whose journals and caches a
// command finds whichever spelling it was given. Host names are not
// resolved: localhost and 127.0.0.1 stay two names (a name may lead to
// another server than an address), and commands that look for journals
// name those of the same bucket and prefix under other endpoints.
func Endpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return Redacted(raw)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if u.Scheme == "http" && port == "80" || u.Scheme == "https" && port == "443" {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"): // IPv6
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), strings.TrimRight(u.RawPath, "/")
	u.Fragment, u.RawFragment = "", ""
	return Redacted(u.String())
}
