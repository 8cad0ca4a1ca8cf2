// Package workflow is `pier workflow prepare|verify`: a prepared
// operation graph from a file, and the offline check of a prepared
// workflow's envelope.
package workflow
