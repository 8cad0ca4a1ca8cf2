// Package help holds the help topics, pages `pier help TOPIC` prints from
// inside the binary, such as exit-codes.
package help
