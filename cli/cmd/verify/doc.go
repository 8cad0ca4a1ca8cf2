// Package verify is `pier verify-sandbox-proof`: an auditor's check of a
// sandbox proof's signatures and separation, against the published
// reference release.
package verify
