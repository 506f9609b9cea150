//go:build !dataenv_testhooks

package crashpoint

// Hit does nothing without the dataenv_testhooks tag.
func Hit(string) {}

// Armed is false without the dataenv_testhooks tag.
func Armed(string) bool { return false }

// HitOnce does nothing without the dataenv_testhooks tag.
func HitOnce(string) {}

// FailOnce returns nil without the dataenv_testhooks tag.
func FailOnce(string) error { return nil }
