// Package cmdutil is what every pier command shares, as gh's pkg/cmdutil
// is: the Factory (streams, configuration, API clients), the bare root
// with the global flags (--base-url, --api-key, --json, --yes, --no-wait,
// --timeout) and Execute, which maps an outcome to its exit code; exit
// codes and usage errors; envelope and error printing with the next steps
// written as pier commands; the generic command of one contract operation
// (OperationSpec, NewCmdOperation), task waiting and progress; the
// --project fallback to PIER_PROJECT and its hidden --project-id alias;
// and the hand-over of the server's commands to pier-server.
//
// It imports no command package: they import it.
package cmdutil
