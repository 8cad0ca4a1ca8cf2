package sdk

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
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
	body, err := open()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.baseURL+"/v1/blobs/"+url.PathEscape(sha256), body)
	if err != nil {
		body.Close()
		return nil, err
	}
	req.ContentLength = size
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
	var env BlobEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	return &env, nil
}
