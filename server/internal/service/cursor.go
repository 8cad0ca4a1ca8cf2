package service

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/pierhq/pier/server/internal/apierr"
	"github.com/pierhq/pier/server/internal/store"
)

// A list's cursor names the last item of a page: its creation time and
// id, encoded so that clients treat it as opaque.

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "." + id))
}

// ParseCursor reads a list's cursor parameter; "" is the list's start.
func ParseCursor(s string) (store.Cursor, error) {
	if s == "" {
		return store.Cursor{}, nil
	}
	bad := apierr.New("input:invalid", "cursor is not one a list answered; send nextCursor as it came").
		WithField("query.cursor", "not a cursor")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.Cursor{}, bad
	}
	at, id, ok := strings.Cut(string(raw), ".")
	micros, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || micros <= 0 || id == "" {
		return store.Cursor{}, bad
	}
	return store.Cursor{At: micros, ID: id}, nil
}

// nextCursor is the cursor after the last of n items when the page is
// full (more may follow), else nil.
func nextCursor(f store.Filter, n int, at time.Time, id string) *string {
	if n == 0 || n < f.PageSize() {
		return nil
	}
	c := encodeCursor(at, id)
	return &c
}

// Page is one page of a list, newest first.
type Page[T any] struct {
	Items []T
	// NextCursor reads the next page; nil on the last.
	NextCursor *string
	// Args are the list's filters, which the next page's call repeats.
	Args map[string]any
}
