-- Compressed forms of blobs, made once per content and kept by its hash,
-- so that no launch, replica or restart compresses a file again. The
-- encoding is a Content-Encoding token ('gzip', 'br'); a row with encoding
-- 'identity' and no data records that the forms were made, so that
-- content no encoding shrinks enough is not tried again. With an object
-- store the data lives there, as a blob's does, and the row keeps its size.
CREATE TABLE blob_forms (
    sha256     TEXT NOT NULL,
    encoding   TEXT NOT NULL,
    size       BIGINT NOT NULL,
    data       BLOB NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (sha256, encoding)
);
