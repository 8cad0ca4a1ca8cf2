// Package acme obtains certificates for preview hosts and launched domains
// from an ACME server (Let's Encrypt in production, Pebble in tests) with
// lego, proving control of each name with the HTTP-01 challenge that the
// server's HTTP listener answers through Issuer.ServeHTTP.
//
// It keeps certificates per host in memory and in a directory (keys 0600),
// so a restart does not ask the ACME server again, and renews a certificate
// once it is within 30 days of expiring. It decides nothing about which
// names deserve a certificate: its caller asks only for names it serves.
package acme
