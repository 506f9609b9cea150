package main

import (
	"strings"
	"testing"
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
