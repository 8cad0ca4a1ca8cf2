// Package objstore keeps blob bodies in an S3-compatible object store
// (minio-go), for replicas that would rather not hold every file in
// PostgreSQL. Objects are named blobs/<sha256>, and a blob's compressed
// forms blobs/<sha256>.<encoding>; content addressing makes a repeated Put
// harmless.
package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 is an S3-compatible bucket.
type S3 struct {
	c      *minio.Client
	bucket string
}

// Open reads s3://BUCKET?endpoint=HOST:PORT[&insecure=true][&region=R],
// signing with the access key and secret.
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
	c, err := minio.New(endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(accessKey, secret, ""),
		Secure: q.Get("insecure") != "true",
		Region: q.Get("region"),
	})
	if err != nil {
		return nil, err
	}
	s := &S3{c: c, bucket: u.Host}
	ok, err := c.BucketExists(ctx, s.bucket)
	if err != nil {
		return nil, fmt.Errorf("objstore: bucket %s: %w", s.bucket, err)
	}
	if !ok {
		return nil, fmt.Errorf("objstore: bucket %s does not exist", s.bucket)
	}
	return s, nil
}

func key(sha string) string { return "blobs/" + sha }

// Put stores data under its SHA-256.
func (s *S3) Put(ctx context.Context, sha string, data []byte) error {
	_, err := s.c.PutObject(ctx, s.bucket, key(sha), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return err
}

// Get reads a blob back and checks it is what its name says.
func (s *S3) Get(ctx context.Context, sha string) ([]byte, error) {
	o, err := s.c.GetObject(ctx, s.bucket, key(sha), minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	data, err := io.ReadAll(o)
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
	_, err := s.c.PutObject(ctx, s.bucket, key(sha)+"."+encoding, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return err
}

// GetForm reads a compressed form back; the store checks its size
// against the one it recorded.
func (s *S3) GetForm(ctx context.Context, sha, encoding string) ([]byte, error) {
	o, err := s.c.GetObject(ctx, s.bucket, key(sha)+"."+encoding, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return io.ReadAll(o)
}
