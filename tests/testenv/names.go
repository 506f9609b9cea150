package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// randomHex returns 2n random lowercase hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mangle lowercases s and keeps [a-z0-9], replacing every other run of bytes with sep, and cuts
// the result to max bytes.
func mangle(s string, sep byte, max int) string {
	var b strings.Builder
	lastSep := true
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			lastSep = false
		} else if !lastSep {
			b.WriteByte(sep)
			lastSep = true
		}
		if b.Len() >= max {
			break
		}
	}
	out := strings.Trim(b.String(), string(sep))
	if len(out) > max {
		out = strings.Trim(out[:max], string(sep))
	}
	return out
}

// uniqueName is "<mangled test name>_<8 hex>" within 63 bytes (a PostgreSQL identifier).
func uniqueName(t testing.TB, prefix string) string {
	base := mangle(t.Name(), '_', 40)
	if base == "" {
		base = "t"
	}
	return prefix + base + "_" + randomHex(4)
}
