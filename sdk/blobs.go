package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// PutBlob calls upload_blob with the content streamed as the request body
// (application/octet-stream) rather than base64 in JSON. open returns the
// content from its start; it is called again for each retry, so the
// content is never held in memory. size is the content's length, sent as
// Content-Length, so that the server can refuse an oversized file before
// reading it.
//
// upload_blob is idempotent: sending the same content again changes
// nothing, so a failed or interrupted call can simply be repeated.
func (c *Client) PutBlob(ctx context.Context, sha256 string, size int64, open func() (io.ReadCloser, error), opts ...RequestEditorFn) (*BlobEnvelope, error) {
	if size == 0 {
		// No content to read: an empty body, which net/http sends as such.
		open = func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	return sendOctets[BlobEnvelope](ctx, c, http.MethodPut, "/v1/blobs/"+url.PathEscape(sha256), size, open, opts)
}

// sendOctets sends the body open makes, of the given length, as
// application/octet-stream, and decodes a 200's envelope into T; open is
// called again for a retry.
func sendOctets[T any](ctx context.Context, c *Client, method, path string, length int64, open func() (io.ReadCloser, error), opts []RequestEditorFn) (*T, error) {
	body, err := open()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		body.Close()
		return nil, err
	}
	req.ContentLength = length
	req.GetBody = open
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json")
	for _, o := range opts {
		if err := o(ctx, req); err != nil {
			return nil, err
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b := readAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, errorFromResponse(resp, b)
	}
	var env T
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	return &env, nil
}

// BlobSource is one content for PutBlobs: its SHA-256, its length, and
// how to read it from its start.
type BlobSource struct {
	SHA256 string
	Size   int64
	Open   func() (io.ReadCloser, error)
}

// PutBlobs calls upload_blobs with the contents streamed as one framed
// body (application/octet-stream): for each, a line "SHA256 SIZE" and its
// bytes. Each content is opened only when the body reaches it, and closed
// once sent, so none is held in memory; the body is made again for a
// retry. The server stores each content as it arrives: after a failure,
// what fully arrived is kept, and find_missing_blobs lists the rest.
//
// Like upload_blob it is idempotent: sending contents again changes
// nothing.
func (c *Client) PutBlobs(ctx context.Context, contents []BlobSource, opts ...RequestEditorFn) (*BlobBatchEnvelope, error) {
	var length int64
	for _, b := range contents {
		length += int64(len(frameHeader(b))) + b.Size
	}
	open := func() (io.ReadCloser, error) { return &framedBody{contents: contents}, nil }
	return sendOctets[BlobBatchEnvelope](ctx, c, http.MethodPost, "/v1/blobs", length, open, opts)
}

func frameHeader(b BlobSource) string {
	return b.SHA256 + " " + strconv.FormatInt(b.Size, 10) + "\n"
}

// framedBody reads contents one after another, each after its frame
// header, opening each as it is reached. A content that is not exactly
// its announced size fails the body: the framing would not hold.
type framedBody struct {
	contents []BlobSource
	i        int
	header   string
	cur      io.ReadCloser
	left     int64
}

// Read fills p with as many frames as fit: a body of small contents goes
// out in a few large writes, not two or three a content.
func (f *framedBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := f.readOne(p[n:])
		n += m
		if err == io.EOF && n > 0 {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readOne reads from the current frame's header or content.
func (f *framedBody) readOne(p []byte) (int, error) {
	for {
		switch {
		case f.header != "":
			n := copy(p, f.header)
			f.header = f.header[n:]
			return n, nil
		case f.cur != nil:
			if f.left == 0 {
				var one [1]byte
				if n, _ := f.cur.Read(one[:]); n > 0 {
					return 0, fmt.Errorf("content %s is longer than %d bytes: it changed since it was hashed", f.contents[f.i-1].SHA256, f.contents[f.i-1].Size)
				}
				f.cur.Close()
				f.cur = nil
				continue
			}
			if int64(len(p)) > f.left {
				p = p[:f.left]
			}
			n, err := f.cur.Read(p)
			f.left -= int64(n)
			if err == io.EOF {
				if f.left > 0 {
					return n, fmt.Errorf("content %s is shorter than %d bytes: it changed since it was hashed", f.contents[f.i-1].SHA256, f.contents[f.i-1].Size)
				}
				err = nil
			}
			return n, err
		case f.i < len(f.contents):
			b := f.contents[f.i]
			f.i++
			f.header = frameHeader(b)
			if b.Size == 0 {
				continue
			}
			r, err := b.Open()
			if err != nil {
				return 0, err
			}
			f.cur, f.left = r, b.Size
		default:
			return 0, io.EOF
		}
	}
}

func (f *framedBody) Close() error {
	if f.cur != nil {
		return f.cur.Close()
	}
	return nil
}
