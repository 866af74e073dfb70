package routing

import "strings"

// RequestHost turns a request's Host header into the name routes are keyed
// by: lowercased, port removed, brackets of an IPv6 literal removed, one
// trailing dot removed. It does not allocate when the host is already in that
// form, so it is cheap enough for every proxied request.
func RequestHost(host string) string {
	if host == "" {
		return ""
	}
	if host[0] == '[' {
		// [v6]:port or [v6]
		if end := strings.IndexByte(host, ']'); end > 0 {
			host = host[1:end]
		} else {
			host = host[1:]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		// exactly one colon: name:port (a bare IPv6 literal has several)
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	return lowerASCII(host)
}

// lowerASCII lowercases ASCII letters, returning s itself when nothing changes.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// WildcardKey is the key a host is looked up under after an exact miss: its
// first label replaced by `*` (rule 7). It answers "" for a name with a single
// label or an empty first label, which no key can match.
func WildcardKey(host string) string {
	dot := strings.IndexByte(host, '.')
	if dot <= 0 || dot == len(host)-1 {
		return ""
	}
	return "*" + host[dot:]
}

// IsDenied reports whether path falls under one of the denied prefixes at a
// segment boundary: the prefix exactly, or the prefix followed by `/`
// (docs/ingress.md "The routing document"; the cleaning in docs/decisions.md
// "Adapter: denied paths also checked after cleaning"). The path is also checked after dot-segment and
// duplicate-slash cleaning and case folding, so `/v1//storage`,
// `/x/../v1/storage` and `/V1/Storage` are denied too: denying more on an API
// host costs nothing, proxying one of these could leak the keyspace.
func IsDenied(path string, denied []string) bool {
	if len(denied) == 0 {
		return false
	}
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	if deniedExact(path, denied) {
		return true
	}
	clean := lowerASCII(cleanPath(path))
	return clean != path && deniedExact(clean, denied)
}

func deniedExact(path string, denied []string) bool {
	for _, prefix := range denied {
		prefix = strings.TrimSuffix(prefix, "/")
		if prefix == "" {
			return true
		}
		if strings.HasPrefix(path, prefix) && (len(path) == len(prefix) || path[len(prefix)] == '/') {
			return true
		}
	}
	return false
}

// cleanPath resolves `.` and `..` segments and collapses repeated slashes,
// keeping a trailing slash (which the segment-boundary rule cares about).
// It returns path itself when nothing changes.
func cleanPath(path string) string {
	if !strings.Contains(path, "//") && !strings.Contains(path, "/.") {
		return path
	}
	segments := strings.Split(path, "/")
	out := make([]string, 0, len(segments))
	for _, s := range segments {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	cleaned := "/" + strings.Join(out, "/")
	last := segments[len(segments)-1]
	if (last == "" || last == "." || last == "..") && cleaned != "/" {
		cleaned += "/"
	}
	return cleaned
}
