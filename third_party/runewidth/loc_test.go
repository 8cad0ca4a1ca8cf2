//go:build !windows && !js && !appengine
// +build !windows,!js,!appengine

package runewidth

import (
	"regexp"
	"testing"
)

// locCharset (README.pier.md) matches what upstream's pattern matches, with
// the same submatch, over locales real and odd.
func TestLocCharsetMatchesUpstream(t *testing.T) {
	reLoc := regexp.MustCompile(`^[a-z][a-z][a-z]?(?:_[A-Z][A-Z])?\.(.+)`)
	locales := []string{"", "C", "POSIX", "C.UTF-8", "en_US.UTF-8", "ja_JP.eucJP", "zh_CN.GB2312", "ko_KR.EUC-KR",
		"ja.SJIS", "haw_US.UTF-8", "haw.utf8", "e.UTF-8", "en_US", "en_US.", "en_us.UTF-8", "EN_US.UTF-8",
		"en_USA.UTF-8", "enus.UTF-8", "en_U.UTF-8", "en_US.UTF-8@cjk_narrow", "zh_TW.big5@euro", "en.x\ny",
		"en.\nx", "abcd.x", "ab_.x", "ab_CD", "ab_CD.", "ab_CDE.x", "ab..", "ab.é", "ab_CD.\xff", "a", "ab", "ab."}
	for _, loc := range locales {
		want, ok := "", false
		if m := reLoc.FindStringSubmatch(loc); len(m) == 2 {
			want, ok = m[1], true
		}
		got, gotOK := locCharset(loc)
		if got != want || gotOK != ok {
			t.Errorf("locCharset(%q) = %q, %v; upstream's pattern: %q, %v", loc, got, gotOK, want, ok)
		}
	}
}
