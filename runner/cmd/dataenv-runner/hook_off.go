//go:build !dataenv_testhooks

package main

import (
	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// testHook is nil in the shipped runner: a request's TestHook is ignored.
func testHook(*protocol.Request) engine.BlockHook { return nil }

// afterResult does nothing in the shipped runner.
func afterResult(*protocol.Request) {}
