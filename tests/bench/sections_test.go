package main

import (
	"strings"
	"testing"
	"time"
)

func TestReplaceSectionKeepsOthers(t *testing.T) {
	doc, err := replaceSection("", "b", "## b\none")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ = replaceSection(doc, "a", "## a\nfirst")
	doc, _ = replaceSection(doc, "c", "## c\nthird")
	doc, err = replaceSection(doc, "a", "## a\nsecond")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc, "# Benchmarks") {
		t.Errorf("header lost:\n%s", doc)
	}
	if strings.Contains(doc, "first") || !strings.Contains(doc, "second") {
		t.Errorf("section a not replaced:\n%s", doc)
	}
	ia, ib, ic := strings.Index(doc, "## a"), strings.Index(doc, "## b"), strings.Index(doc, "## c")
	if !(ib < ia && ia < ic) || !strings.Contains(doc, "one") || !strings.Contains(doc, "third") {
		t.Errorf("other sections moved or lost:\n%s", doc)
	}
	if _, err := replaceSection(beginMarker("x")+"\n", "x", "y"); err == nil {
		t.Error("a section without its end marker was accepted")
	}
}

func TestForkOutline(t *testing.T) {
	steps := "+58 ms workspace role r created: on cluster instance for workspace f\n" +
		"  +141 ms workspace f created: fork of p with 1 datatable(s) (checks 5ms and cleanup 10ms, copies 106ms, commit 12ms)\n" +
		"  +160 ms lakes of f prepared: 0 lake(s)"
	got := forkOutline(steps, 161*time.Millisecond)
	want := "the fork 161ms: checks 5ms and cleanup 10ms, copies 106ms, commit 12ms, then grants and lakes prepared 20ms"
	if got != want {
		t.Errorf("forkOutline = %q, want %q", got, want)
	}
	if got := forkOutline("+3 ms copy datatable d (schema_only) done: x", time.Second); got != "" {
		t.Errorf("forkOutline without a created step = %q, want empty", got)
	}
}
