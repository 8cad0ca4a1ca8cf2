// Package version is Pier's release version, shared by the server, the SDK
// and the CLI.
package version

// Version is the release version.
const Version = "0.1.0"
