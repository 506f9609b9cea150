//go:build dataenv_testhooks

package main

/*
#include <signal.h>
// segfault dereferences NULL with the default SIGSEGV action restored, the way a crash inside
// DuckDB or an extension ends the process.
static void segfault(void) {
	signal(SIGSEGV, SIG_DFL);
	*(volatile int *)0 = 0;
}
*/
import "C"

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// testHook returns the block hook of req's TestHook (only in runners built with the
// dataenv_testhooks tag, which the tests build).
func testHook(req *protocol.Request) engine.BlockHook {
	h := req.TestHook
	if h == nil {
		return nil
	}
	return func(done int) {
		if done != h.AfterBlock {
			return
		}
		if h.Print > 0 {
			printBytes(os.Stdout, h.Print)
			printBytes(os.Stderr, h.Print)
		}
		if h.SymlinkResultTo != "" {
			os.Remove(req.ResultPath)
			os.Symlink(h.SymlinkResultTo, req.ResultPath)
			os.Exit(0)
		}
		if h.Crash == "SIGSEGV" {
			C.segfault()
		}
	}
}

// afterResult runs between the result and the exit: TestHook.ExitDelayMS.
func afterResult(req *protocol.Request) {
	if h := req.TestHook; h != nil && h.ExitDelayMS > 0 {
		time.Sleep(time.Duration(h.ExitDelayMS) * time.Millisecond)
	}
}

func printBytes(f *os.File, n int64) {
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for ; n > 0; n -= int64(len(line)) {
		if _, err := f.Write(line); err != nil {
			return
		}
	}
	f.Write([]byte("end of " + filepath.Base(f.Name()) + "\n"))
}
