package service

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pierhq/pier/server/internal/safetext"
)

// FuzzBundlePath holds safePath, which guards every path a bundle's
// manifest records and the edge later serves, to its promise: a path it
// accepts is relative, clean, free of dot segments, backslashes, control
// and bidi characters and invalid UTF-8, and cannot climb out of the site.
func FuzzBundlePath(f *testing.F) {
	for _, s := range []string{"index.html", "a/b/c.css", "../etc/passwd", "/abs", "a//b", "a/./b", `a\b`, "a\x00b",
		"dir/", "\xff.html", "admin\u202egnp.html", "über/ß.html", strings.Repeat("a", 300) + ".html", "a/../../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if safePath(p) != nil {
			return
		}
		switch {
		case strings.HasPrefix(p, "/"), strings.Contains(p, `\`), path.Clean(p) != p:
			t.Fatalf("accepted an unclean or absolute path %q", p)
		case !utf8.ValidString(p), safetext.Problem(p) != "":
			t.Fatalf("accepted text that reads as something else: %q", p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted a dot or empty segment in %q", p)
			}
		}
		// Served under a site root, it stays under that root.
		if served := path.Join("/site", p); !strings.HasPrefix(served, "/site/") {
			t.Fatalf("%q escapes the site as %q", p, served)
		}
	})
}
