module github.com/gowebpki/jcs

go 1.21
