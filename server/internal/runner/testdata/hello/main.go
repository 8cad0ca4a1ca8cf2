// Command hello answers every request with "hello" on $PORT: the smallest
// process version, for the start-up benchmarks.
package main

import (
	"net/http"
	"os"
)

func main() {
	http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("hello"))
	}))
}
