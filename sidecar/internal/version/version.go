// Package version holds the build's version, set with -ldflags "-X .../version.Version=...".
package version

// Version is the release of this binary.
var Version = "0.1.0-dev"
