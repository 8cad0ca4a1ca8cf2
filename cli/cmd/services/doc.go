// Package services holds the hand-written commands for running services:
// `pier logs` (a service's lines, or following them) and `pier
// rollback` (back to an earlier version, waiting for the task).
package services
