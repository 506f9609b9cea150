//go:build dataenv_testhooks

package app

import (
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/testkinds"
)

// Test binaries (tests/sidecartest builds them with -tags dataenv_testhooks) also serve the
// test-only request kinds.
func init() {
	registerTestKinds = func(reg *request.Registry, c components) {
		testkinds.Register(reg, testkinds.Deps{Pool: c.Pool, Lakes: c.Lakes})
	}
}
