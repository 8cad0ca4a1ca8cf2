package edge

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"testing"

	"github.com/andybalholm/brotli"
)

// BenchmarkForms measures what making a file's compressed forms costs, once
// per content, and what each encoding and level saves: gzip at its best
// level and brotli at levels 4 to 6 and 11, on a 1 KiB page (the digest
// benchmark's files), 24 KiB of base64 text (the launch benchmark's
// scripts) and this repository's architecture document (about 100 KiB of
// prose). makeForms is what the edge runs: gzip 9 and brotli 5, pooled.
func BenchmarkForms(b *testing.B) {
	doc, err := os.ReadFile("../../../docs/architecture.md")
	if err != nil {
		b.Fatal(err)
	}
	page := make([]byte, 1024)
	text := []byte(rand.Text() + rand.Text())
	for i := range page {
		page[i] = text[i%len(text)]
	}
	raw := make([]byte, 18<<10)
	rand.Read(raw)
	inputs := []struct {
		name string
		data []byte
	}{{"page-1k", page}, {"base64-24k", []byte(base64.StdEncoding.EncodeToString(raw))}, {"doc-" + fmt.Sprint(len(doc)>>10) + "k", doc}}
	for _, in := range inputs {
		ratio := func(b *testing.B, n int) {
			b.SetBytes(int64(len(in.data)))
			b.ReportMetric(float64(n)/float64(len(in.data)), "ratio")
		}
		b.Run(in.name+"/gzip-9", func(b *testing.B) {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			for b.Loop() {
				buf.Reset()
				zw.Reset(&buf)
				zw.Write(in.data)
				zw.Close()
			}
			ratio(b, buf.Len())
		})
		for _, level := range []int{4, 5, 6, 11} {
			b.Run(fmt.Sprintf("%s/br-%d", in.name, level), func(b *testing.B) {
				var buf bytes.Buffer
				bw := brotli.NewWriterLevel(&buf, level)
				for b.Loop() {
					buf.Reset()
					bw.Reset(&buf)
					bw.Write(in.data)
					bw.Close()
				}
				ratio(b, buf.Len())
			})
		}
		b.Run(in.name+"/makeForms", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				makeForms(in.data)
			}
			f := makeForms(in.data)
			ratio(b, len(f.Brotli))
		})
	}
}
