// Package mail is `pier mail wait` (`pier mail` being the email group's
// other name): wait for a message to an address, such as a verification
// code, and print it.
package mail
