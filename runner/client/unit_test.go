package client

import (
	"strings"
	"testing"
)

func TestUnforceRewritesOnlyForceInstall(t *testing.T) {
	in := []string{"force  install httpfs;", "INSTALL spatial FROM community", "INSTALL x FROM 'http://evil'", "SELECT 'FORCE INSTALL x'"}
	want := []string{"INSTALL httpfs", "INSTALL spatial FROM community", "INSTALL x FROM 'http://evil'", "SELECT 'FORCE INSTALL x'"}
	got := unforce(in)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("unforce = %q, want %q", got, want)
	}
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	tl := newTail(10)
	for _, chunk := range []string{"abc", "defghij", "klm", strings.Repeat("n", 25), "opq"} {
		tl.Write([]byte(chunk))
	}
	if got := tl.String(); got != "nnnnnnnopq" {
		t.Fatalf("tail %q", got)
	}
	if tl.Total() != 41 {
		t.Fatalf("total %d", tl.Total())
	}
	if cap(tl.buf) > 20 {
		t.Fatalf("buffer grew to %d", cap(tl.buf))
	}
}

func TestResolveIsolation(t *testing.T) {
	if m, err := resolve(IsolationAuto, IsolationUnshare, ""); err != nil || m != IsolationUnshare {
		t.Fatalf("job auto, config unshare: %s, %v", m, err)
	}
	if m, err := resolve(IsolationPlain, IsolationJailed, ""); err != nil || m != IsolationPlain {
		t.Fatalf("job plain overrides config: %s, %v", m, err)
	}
	if _, err := resolve("chroot", IsolationAuto, ""); err == nil || !strings.Contains(err.Error(), "want jailed, unshare or plain") {
		t.Fatalf("unknown isolation: %v", err)
	}
	if _, err := resolve(IsolationJailed, IsolationAuto, "firejail"); err == nil {
		t.Fatal("unknown jail accepted")
	}
}
