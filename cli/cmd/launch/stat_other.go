//go:build !linux

package launch

import (
	"io/fs"
	"os"
	"path/filepath"
)

// fileIdentity is unknown here: the cache trusts size and modification
// time alone.
func fileIdentity(fs.FileInfo) (ino, ctime int64) { return 0, 0 }

// statter lstats the files of a site by their paths relative to its
// directory.
type statter struct{ dir string }

func openStatter(dir string) *statter { return &statter{dir: dir} }

func (s *statter) stat(rel string) (fileStat, error) {
	return lstatPath(filepath.Join(s.dir, rel))
}

func (s *statter) close() {}

// statAt lstats the file name of the folder f, abs being its path.
func statAt(_ *os.File, _, abs string) (fileStat, error) { return lstatPath(abs) }

// statOpen stats a file held open; with no inode or change time, the
// cache lists its folder again.
func statOpen(f *os.File) (fileStat, error) {
	info, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: info.Size(), mod: info.ModTime(), regular: info.Mode().IsRegular()}, nil
}

// folderStatter lstats files by their paths under a site's directory.
type folderStatter struct{ root string }

func newFolderStatter(root string) *folderStatter { return &folderStatter{root: root} }

func (s *folderStatter) stat(rel string) (fileStat, error) {
	return lstatPath(filepath.Join(s.root, filepath.FromSlash(rel)))
}

func (s *folderStatter) close() {}
