// Package conformance is `pier conformance run|verify|jwks`: Pier's public
// probes run against a deployment into a signed report, and the auditor's
// offline check of reports and their chain.
package conformance
