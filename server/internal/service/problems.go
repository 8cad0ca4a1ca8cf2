package service

// Problem is what is wrong with one field of a request: the field's path
// (body.manifest.3.path) and the problem, as a refusal's details list it.
type Problem struct {
	Field, Problem string
}
