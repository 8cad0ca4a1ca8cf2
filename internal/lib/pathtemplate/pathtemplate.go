// Package pathtemplate matches concrete paths against the contract's path
// templates, such as /v1/quotes/{id}.
package pathtemplate

import "strings"

// Match reports whether path fits template: literal segments equal, and a
// {parameter} segment anything but empty.
func Match(template, path string) bool {
	t := strings.Split(strings.Trim(template, "/"), "/")
	p := strings.Split(strings.Trim(path, "/"), "/")
	if len(t) != len(p) {
		return false
	}
	for i := range t {
		if strings.HasPrefix(t[i], "{") {
			if p[i] == "" {
				return false
			}
			continue
		}
		if t[i] != p[i] {
			return false
		}
	}
	return true
}

// Best picks, among the templates that match, the one with the fewest
// parameters: a literal segment beats a parameter, as in net/http's
// ServeMux, so /v1/domains/search is not /v1/domains/{domain}. It returns
// the index into templates, or -1.
func Best(templates []string, path string) int {
	best, bestParams := -1, 0
	for i, t := range templates {
		if !Match(t, path) {
			continue
		}
		if n := strings.Count(t, "{"); best < 0 || n < bestParams {
			best, bestParams = i, n
		}
	}
	return best
}

// Route is the index in table of the entry a request's method and concrete
// path belong to, by Best over the templates of the entries with that
// method, or -1. route reads an entry's method and path template: the
// server's policy table and the SDK's operation table both route so.
func Route[T any](table []T, method, path string, route func(T) (method, template string)) int {
	var index []int
	var templates []string
	for i, e := range table {
		if m, t := route(e); m == method {
			index, templates = append(index, i), append(templates, t)
		}
	}
	if i := Best(templates, path); i >= 0 {
		return index[i]
	}
	return -1
}
