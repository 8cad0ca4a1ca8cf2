// Package objstore keeps blob bodies in an S3-compatible object store, for
// replicas that would rather not hold every file in PostgreSQL. Objects are
// named blobs/<sha256>, and a blob's compressed forms
// blobs/<sha256>.<encoding>; content addressing makes a repeated Put
// harmless.
//
// It speaks the three S3 calls it needs (HEAD bucket, PUT and GET object,
// path-style) over net/http, signed by minio-go's SigV4 signer package.
// The full minio-go client is not used: it brings in a JSON encoder whose
// compilation was an eighth of the server's first build, for four calls.
package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// maxBody bounds what Get reads back: blobs are site files, which the
// store already caps far below this.
const maxBody = 1 << 30

// S3 is an S3-compatible bucket.
type S3 struct {
	client    *http.Client
	base      string // scheme://endpoint/bucket
	region    string
	accessKey string
	secret    string
}

// Open reads s3://BUCKET?endpoint=HOST:PORT[&insecure=true][&region=R],
// signing with the access key and secret, and checks that the bucket
// exists.
func Open(ctx context.Context, rawURL, accessKey, secret string) (*S3, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return nil, fmt.Errorf("objstore: want s3://BUCKET?endpoint=HOST:PORT, not %q", rawURL)
	}
	q := u.Query()
	endpoint := q.Get("endpoint")
	if endpoint == "" {
		endpoint = "s3.amazonaws.com"
	}
	scheme := "https"
	if q.Get("insecure") == "true" {
		scheme = "http"
	}
	region := q.Get("region")
	if region == "" {
		region = "us-east-1"
	}
	s := &S3{
		client:    &http.Client{Timeout: 2 * time.Minute},
		base:      scheme + "://" + endpoint + "/" + url.PathEscape(u.Host),
		region:    region,
		accessKey: accessKey,
		secret:    secret,
	}
	resp, err := s.do(ctx, http.MethodHead, "", nil)
	if err != nil {
		return nil, fmt.Errorf("objstore: bucket %s: %w", u.Host, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("objstore: bucket %s does not exist", u.Host)
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("objstore: bucket %s: %s", u.Host, resp.Status)
	}
	return s, nil
}

func key(sha string) string { return "blobs/" + sha }

// do sends one signed request for the object at key ("" for the bucket).
func (s *S3) do(ctx context.Context, method, key string, body []byte) (*http.Response, error) {
	target := s.base
	if key != "" {
		target += "/" + key
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body == nil {
		req.Body, req.GetBody = http.NoBody, nil
	}
	req.ContentLength = int64(len(body))
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	if method == http.MethodPut {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	signed := signer.SignV4(*req, s.accessKey, s.secret, "", s.region)
	return s.client.Do(signed)
}

// put stores body under key.
func (s *S3) put(ctx context.Context, key string, body []byte) error {
	resp, err := s.do(ctx, http.MethodPut, key, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("objstore: put %s: %s", key, failure(resp))
	}
	return nil
}

// get reads the object at key back.
func (s *S3) get(ctx context.Context, key string) ([]byte, error) {
	resp, err := s.do(ctx, http.MethodGet, key, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("objstore: get %s: %s", key, failure(resp))
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxBody))
}

// failure names a refused call by its status and the S3 error code, when
// the body carries one.
func failure(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if i := bytes.Index(b, []byte("<Code>")); i >= 0 {
		rest := b[i+len("<Code>"):]
		if j := bytes.Index(rest, []byte("</Code>")); j >= 0 {
			return resp.Status + " (" + string(rest[:j]) + ")"
		}
	}
	return resp.Status
}

// Put stores data under its SHA-256.
func (s *S3) Put(ctx context.Context, sha string, data []byte) error {
	return s.put(ctx, key(sha), data)
}

// Get reads a blob back and checks it is what its name says.
func (s *S3) Get(ctx context.Context, sha string) ([]byte, error) {
	data, err := s.get(ctx, key(sha))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if !strings.EqualFold(hex.EncodeToString(sum[:]), sha) {
		return nil, fmt.Errorf("objstore: blob %s came back with other content", sha)
	}
	return data, nil
}

// PutForm stores a compressed form of the blob named sha.
func (s *S3) PutForm(ctx context.Context, sha, encoding string, data []byte) error {
	return s.put(ctx, key(sha)+"."+encoding, data)
}

// GetForm reads a compressed form back; the store checks its size
// against the one it recorded.
func (s *S3) GetForm(ctx context.Context, sha, encoding string) ([]byte, error) {
	return s.get(ctx, key(sha)+"."+encoding)
}
